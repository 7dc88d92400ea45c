"""Manifests, presets and precompile from Python, against the CLI."""

import json
import os
import threading

import pytest

from conftest import TINY_MANIFEST, cli, cli_json, same_nvrtc_as_cli

import megajit

PRESETS = ["deepseek-v3-ep8", "kimi-k2-ep8", "qwen3-235b-ep4", "gpt-oss-120b-ep1", "gpt-oss-20b-ep1",
           "glm-4.5-ep8", "minimax-m2-ep8"]

BAD_MANIFESTS = [
    ('{"archs": ["sm_90a"], "layers": [{"hidden": 100}]}', "layers[0]"),
    ('{"archs": [], "layers": []}', "archs"),
    ('{"archs": ["sm_90a"], "layers": [], "bogus": 1}', "bogus"),
    ("{not json", "invalid JSON"),
    (json.dumps({**TINY_MANIFEST, "layers": [{**TINY_MANIFEST["layers"][0], "ranks": 73}]}), "ranks"),
    (json.dumps({**TINY_MANIFEST, "layers": [{**TINY_MANIFEST["layers"][0], "dispatch_format": "fp7"}]}),
     'unknown format "fp7"'),
    (json.dumps({**TINY_MANIFEST, "archs": ["sm_80"]}), "sm_80"),
]


def cli_error(*args):
    """The message the CLI printed for a refused precompile (exit status 2)."""
    p = cli("precompile", *args, check=False)
    assert p.returncode == 2, p.stderr
    return p.stderr.strip().removeprefix("megajit precompile: ")


def test_presets():
    assert megajit.presets() == PRESETS
    for name in PRESETS:
        m = megajit.Manifest.preset(name)
        assert len(m) > 0
        assert m.archs == ["sm_90a"]
        assert all(d.endswith(" sm_90a") for d in m.kernels)


def test_unknown_preset_message_is_the_librarys(tmp_path):
    with pytest.raises(megajit.Error) as e:
        megajit.Manifest.preset("nope")
    assert e.value.message == cli_error("--preset", "nope", "--cache", tmp_path)
    assert "deepseek-v3-ep8" in e.value.message


@pytest.mark.parametrize("text,needle", BAD_MANIFESTS)
def test_manifest_errors_carry_the_librarys_message(tmp_path, text, needle):
    with pytest.raises(megajit.InvalidArgument) as e:
        megajit.Manifest.parse(text)
    assert needle in e.value.message
    assert e.value.status == megajit.Status.ERR_INVALID_ARG
    path = tmp_path / "bad.json"
    path.write_text(text)
    assert e.value.message == cli_error("--manifest", path, "--cache", tmp_path / "c")
    assert isinstance(e.value, ValueError)


def test_manifest_kernels_and_archs(tiny_manifest_path):
    m = megajit.Manifest.load(tiny_manifest_path)
    assert m.kernels == [m.describe(i) for i in range(len(m))]
    assert len(m) == 4
    m.set_archs(["sm_90a", "sm_100a"])
    assert m.archs == ["sm_90a", "sm_100a"]
    assert len(m) == 8
    with pytest.raises(megajit.InvalidArgument, match="archs"):
        m.set_archs("sm_75")
    assert len(m) == 8  # a refused change leaves the manifest as it was
    for source in (TINY_MANIFEST, json.dumps(TINY_MANIFEST), str(tiny_manifest_path), tiny_manifest_path):
        assert megajit.Manifest.load(source).kernels == megajit.Manifest.load(TINY_MANIFEST).kernels


@pytest.mark.parametrize("jobs", [1, 2])
def test_precompile_with_progress_matches_the_cli(tmp_path, tiny_manifest_path, jobs):
    events = []
    report = megajit.precompile(tiny_manifest_path, jobs=jobs, cache_dir=tmp_path / "py",
                                progress=events.append)
    expected = cli_json("precompile", "--manifest", tiny_manifest_path, "--cache", tmp_path / "cli",
                        "--jobs", jobs, "--json")
    assert report.ok
    for field in ("kernels", "compiled", "cached", "failed", "jobs", "archs", "failures"):
        assert getattr(report, field) == expected[field], field
    assert report.cache == str(tmp_path / "py" / "megajit-cache.db")
    # one event per kernel, counting up, with the manifest's descriptions
    descriptions = megajit.Manifest.load(tiny_manifest_path).kernels
    assert sorted(e.index for e in events) == list(range(len(descriptions)))
    assert [e.done for e in events] == list(range(1, len(descriptions) + 1))
    assert all(e.count == len(descriptions) for e in events)
    assert all(e.kernel == descriptions[e.index] and e.result == "compiled" and not e.error for e in events)
    # the same kernels, the same keys (when both compile with the same NVRTC)
    ours = {e["key"] for e in cli_json("cache", "ls", "--json", "--cache", tmp_path / "py")}
    theirs = {e["key"] for e in cli_json("cache", "ls", "--json", "--cache", tmp_path / "cli")}
    assert len(ours) == len(theirs) == report.kernels
    if same_nvrtc_as_cli():
        assert ours == theirs
    # what the workers stored is what this process's runtimes look up
    m = megajit.Manifest.load(tiny_manifest_path)
    with megajit.Runtime(cache_dir=tmp_path / "py") as rt:
        assert [m.build(rt, i)[0] for i in range(len(m))] == [megajit.BuildResult.CACHED] * len(m)
    # a second run finds everything cached
    again = megajit.precompile(tiny_manifest_path, jobs=jobs, cache_dir=tmp_path / "py")
    assert (again.cached, again.compiled) == (report.kernels, 0)


def test_precompile_preset_with_arch_override(tmp_path, tiny_manifest_path):
    m = megajit.Manifest.load(tiny_manifest_path)
    report = megajit.precompile(m, archs="sm_100a", jobs=1, cache_dir=tmp_path)
    assert report.archs == ["sm_100a"] and report.ok
    assert {e.arch for e in megajit.Cache(tmp_path).ls()} == {"sm_100a"}


def test_precompile_refuses_a_cache_that_stores_nothing(tiny_manifest_path):
    events = []
    with pytest.raises(megajit.CacheError) as e:
        megajit.precompile(tiny_manifest_path, cache_dir="", progress=events.append)
    assert e.value.message in cli_error("--manifest", tiny_manifest_path, "--cache", "")
    assert events == []


def child_processes():
    """Live children of this process (every thread's), from /proc."""
    pids = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as f:
            pids += f.read().split()
    return pids


def test_progress_exception_stops_the_run(tmp_path, tiny_manifest_path):
    class Stop(Exception):
        pass

    def progress(event):
        raise Stop(event.kernel)

    before = threading.active_count()
    with pytest.raises(Stop):
        megajit.precompile(tiny_manifest_path, jobs=2, cache_dir=tmp_path, progress=progress)
    # the workers are processes: none may outlive the call, nor a thread of it
    assert child_processes() == []
    assert threading.active_count() == before


def test_manifest_build_one_kernel(tmp_path, tiny_manifest_path):
    m = megajit.Manifest.load(tiny_manifest_path)
    with megajit.Runtime(cache_dir=tmp_path) as rt:
        result, seconds = m.build(rt, 0)
        assert result == megajit.BuildResult.COMPILED and seconds > 0
        assert m.build(rt, 0)[0] == megajit.BuildResult.CACHED
        with pytest.raises(megajit.InvalidArgument, match="out of range"):
            m.build(rt, len(m))
        assert rt.stats().compiles == 1
