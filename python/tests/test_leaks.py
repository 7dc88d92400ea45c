"""No leaked handles: loops of create/destroy, measured by megajit's own count
of live C handles (megajit.live_handles), tracemalloc (Python memory), the
process's open file descriptors (SQLite connections) and its resident memory
(what the C library allocates), plus the runtime's own cache counters."""

import gc
import os
import tracemalloc

import pytest

import megajit

ROUNDS = 150


def open_fds():
    return len(os.listdir("/proc/self/fd"))


def rss_kib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def one_round(cache_dir, manifest_text):
    with megajit.Runtime(cache_dir=cache_dir) as rt:
        rt.info()
        rt.stats()
        rt.families["mega_moe"].num_sms = 8
        with megajit.Manifest.parse(manifest_text) as m:
            assert m.build(rt, 0)[0] == megajit.BuildResult.CACHED
            m.set_archs("sm_90a")
            m.kernels
    with megajit.Cache(cache_dir) as c:
        c.ls()
        c.stat()
        c.verify()
        c.show(c.ls()[0].key[:8])
    with pytest.raises(megajit.InvalidArgument):
        megajit.Manifest.parse('{"archs": []}')
    megajit.Manifest.preset("kimi-k2-ep8").close()


def measure(cache_dir, manifest_text, rounds):
    gc.collect()
    fds, rss = open_fds(), rss_kib()
    snap = tracemalloc.take_snapshot()
    for _ in range(rounds):
        one_round(cache_dir, manifest_text)
    gc.collect()
    grown = sum(s.size_diff for s in tracemalloc.take_snapshot().compare_to(snap, "filename"))
    return open_fds() - fds, rss_kib() - rss, grown


def test_create_destroy_loop_leaks_nothing(process_cache, tiny_manifest_path):
    text = tiny_manifest_path.read_text()
    tracemalloc.start()
    try:
        measure(process_cache, text, 20)  # warm-up: caches of the interpreter and libraries
        fds, rss, py_bytes = measure(process_cache, text, ROUNDS)
    finally:
        tracemalloc.stop()
    assert megajit.live_handles() == {}
    assert fds == 0, f"{fds} file descriptors leaked over {ROUNDS} rounds"
    assert py_bytes < 64 * 1024, f"Python memory grew by {py_bytes} bytes over {ROUNDS} rounds"
    # Each round opens 2 runtimes' worth of SQLite connections and caches; a leak
    # of any would grow RSS by far more than this over the rounds.
    assert rss < 4096, f"resident memory grew by {rss} KiB over {ROUNDS} rounds"


def test_garbage_collector_releases_handles(process_cache):
    before = megajit.live_handles()
    rt = megajit.Runtime(cache_dir=process_cache)
    c = megajit.Cache(process_cache)
    m = megajit.Manifest.preset("qwen3-235b-ep4")
    assert megajit.live_handles() == {k: before.get(k, 0) + 1 for k in ("runtime", "cache", "manifest")}
    del rt, c, m
    gc.collect()
    assert megajit.live_handles() == before


def test_runtime_close_closes_its_children(process_cache):
    rt = megajit.Runtime(cache_dir=process_cache)
    fam = rt.families["pre_dispatch"]
    rt.close()
    assert rt.closed and megajit.live_handles().get("runtime", 0) == 0
    with pytest.raises(megajit.InvalidArgument):
        fam.pdl


def test_runtime_counters(process_cache, tiny_manifest_path):
    """The library's counters: cached builds compile nothing and count no hits of memory."""
    m = megajit.Manifest.load(tiny_manifest_path)
    with megajit.Runtime(cache_dir=process_cache) as rt:
        for _ in range(3):
            for i in range(len(m)):
                assert m.build(rt, i)[0] == megajit.BuildResult.CACHED
        s = rt.stats()
        assert (s.compiles, s.healed, s.compile_seconds) == (0, 0, 0.0)
