"""Every megajit.Cache call against what the CLI (build/bin/megajit ... --json)
shows for the same cache."""

import dataclasses
import json
import os
import shutil
import sqlite3

import pytest

from conftest import cli, cli_json, run_python, same_nvrtc_as_cli

import megajit


def rounded(value):
    """Floats to 12 significant digits: the CLI's JSON (cJSON) prints doubles
    with 15, accepting any value within an epsilon as equal."""
    if isinstance(value, float):
        return float(f"{value:.12g}")
    if isinstance(value, dict):
        return {k: rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [rounded(v) for v in value]
    if dataclasses.is_dataclass(value):
        return rounded(dataclasses.asdict(value))
    return value


def ls_json(cache, *extra, env=None):
    return rounded(cli_json("cache", "ls", "--json", "--cache", cache, *extra, env=env))


def keys(entries):
    return sorted(e["key"] if isinstance(e, dict) else e.key for e in entries)


@pytest.fixture
def two_copies(built_cache, tmp_path):
    """Two identical copies of the built cache: one for Python, one for the CLI."""
    out = []
    for name in ("py", "cli"):
        dst = tmp_path / name
        shutil.copytree(built_cache, dst)
        out.append(dst)
    return out


def test_ls_matches_cli(cache_copy):
    with megajit.Cache(cache_copy) as c:
        ours = rounded(c.ls())
        assert ours == ls_json(cache_copy)
        assert len(ours) == 4
        for family in ("pre_dispatch", "mega_moe"):
            assert rounded(c.ls(family=family)) == ls_json(cache_copy, "--family", family)
        assert rounded(c.ls(arch="sm_90a")) == ls_json(cache_copy, "--arch", "sm_90a")
        assert c.ls(arch="sm_100a") == []
        assert c.path == str(cache_copy / "megajit-cache.db")


def test_ls_lists_read_only_snapshot_layers(cache_copy, tmp_path):
    snap = tmp_path / "snap.db"
    with megajit.Cache(cache_copy) as c:
        c.export(snap)
    code = f"""
import json, megajit
print(json.dumps([e.to_dict() for e in megajit.Cache({str(tmp_path / 'empty')!r}).ls()]))
"""
    env = {"MEGAJIT_CACHE_RO": str(snap)}
    p = run_python(code, env=env)
    assert p.returncode == 0, p.stderr
    ours = rounded(json.loads(p.stdout))
    assert ours == ls_json(tmp_path / "empty", env={**os.environ, **env})
    assert {e["layer"] for e in ours} == {str(snap)}


def parse_show(text):
    """The fields of `megajit cache show` output (headers as a list)."""
    fields, headers, source = {}, [], None
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("--- source ---"):
            source = "\n".join(lines[i + 1:])
            break
        if line.startswith(" ") and headers:
            headers.append(line.strip())
            continue
        if not line.strip():
            continue
        name, _, value = line.partition(" ")
        fields[name] = value.strip()
        if name == "headers":
            headers.append(value.strip())
    return fields, headers, source


def test_show_matches_cli(cache_copy):
    with megajit.Cache(cache_copy) as c:
        for entry in c.ls():
            d = c.show(entry.key[:8])
            fields, headers, source = parse_show(cli("cache", "show", entry.key[:8], "--source",
                                                     "--cache", cache_copy).stdout)
            assert d.entry == entry
            assert fields["key"] == entry.key
            assert fields["kernel"] == entry.kernel_name
            assert fields["symbol"] == entry.lowered_name
            assert fields["compiler"] == entry.compiler
            assert f"({entry.cubin_bytes} bytes)" in fields["cubin"]
            assert d.headers == headers and "layout/codes.h" in headers
            assert d.source.rstrip("\n") == source.rstrip("\n")
            assert len(d.cubin) == entry.cubin_bytes and d.cubin[:4] == b"\x7fELF"
        with pytest.raises(megajit.NotFound) as e:
            c.show("0000")
        assert cli("cache", "show", "0000", "--cache", cache_copy, check=False).returncode != 0
        assert isinstance(e.value, LookupError)
        with pytest.raises(megajit.InvalidArgument):
            c.show("zz")
        with pytest.raises(megajit.InvalidArgument):
            c.show("")


def test_stat_matches_cli(cache_copy):
    with megajit.Cache(cache_copy, read_only=True) as c:
        assert rounded(c.stat()) == rounded(cli_json("cache", "stat", "--json", "--cache", cache_copy))


def test_verify_matches_cli(cache_copy):
    with megajit.Cache(cache_copy) as c:
        v = c.verify()
        assert dataclasses.asdict(v) == cli_json("cache", "verify", "--json", "--cache", cache_copy)
        assert v.ok and v.checked == 4
    db = sqlite3.connect(cache_copy / "megajit-cache.db")
    db.execute("UPDATE entry SET cubin_hash = zeroblob(16) WHERE id = (SELECT min(id) FROM entry)")
    db.commit()
    db.close()
    with megajit.Cache(cache_copy) as c:
        v = c.verify()
        theirs = cli_json("cache", "verify", "--json", "--cache", cache_copy, check=False)
        assert dataclasses.asdict(v) == theirs
        assert v.bad == 1 and not v.ok and v.bad_entries[0]["reason"]


SELECTORS = [
    ({"key": None}, ["--key", None]),  # None: the first entry's key prefix
    ({"family": "pre_dispatch"}, ["--family", "pre_dispatch"]),
    ({"family": "mega_moe"}, ["--family", "mega_moe"]),
    ({"header": "pre_dispatch.cuh"}, ["--header", "pre_dispatch.cuh"]),
    ({"header": "no/such.cuh"}, ["--header", "no/such.cuh"]),
    ({"compiler": None}, ["--compiler", None]),  # None: the entries' compiler string
    ({"arch": "sm_90a"}, ["--arch", "sm_90a"]),
    ({"arch": "sm_100a"}, ["--arch", "sm_100a"]),
    ({"older_than": 0}, ["--older-than", "0"]),
    ({"older_than": 1e6}, ["--older-than", "1000000"]),
    ({"all": True}, ["--all"]),
]


@pytest.mark.parametrize("kwargs,args", SELECTORS, ids=lambda v: str(v))
def test_rm_by_every_selector_matches_cli(two_copies, kwargs, args):
    py, other = two_copies
    first = megajit.Cache(py, read_only=True).ls()[0]
    name = next(iter(kwargs))
    fill = {"key": first.key[:10], "compiler": first.compiler}
    kwargs = {name: fill.get(name) if kwargs[name] is None else kwargs[name]}
    args = [fill.get(name) if a is None else a for a in args]
    with megajit.Cache(py) as c:
        removed = c.rm(**kwargs)
    theirs = cli_json("cache", "rm", *args, "--json", "--cache", other)
    assert removed == theirs["removed"]
    assert ls_json(py) == ls_json(other)


def test_rm_needs_exactly_one_selector(cache_copy):
    with megajit.Cache(cache_copy) as c:
        with pytest.raises(megajit.InvalidArgument, match="exactly one"):
            c.rm()
        with pytest.raises(megajit.InvalidArgument, match="exactly one"):
            c.rm(family="pre_dispatch", arch="sm_90a")
        with pytest.raises(megajit.InvalidArgument, match="number of days"):
            c.rm(older_than=-1)
        with pytest.raises(megajit.InvalidArgument, match="number of days"):
            c.rm(older_than="soon")
        with pytest.raises(TypeError):
            c.rm(older_than=[1])
        with pytest.raises(megajit.InvalidArgument):
            c.rm(key="zz")
        assert len(c.ls()) == 4


@pytest.mark.parametrize("limit", ["0", "40K", "1G"])
def test_gc_matches_cli(two_copies, limit):
    py, other = two_copies
    with megajit.Cache(py) as c:
        ours = c.gc(limit)
    theirs = cli_json("cache", "gc", "--max-bytes", limit, "--json", "--cache", other)
    assert dataclasses.asdict(ours) == theirs
    assert ls_json(py) == ls_json(other)


def test_gc_refuses_negative(cache_copy):
    with megajit.Cache(cache_copy) as c:
        with pytest.raises(megajit.InvalidArgument):
            c.gc(-1)
        with pytest.raises(megajit.InvalidArgument):
            c.gc("lots")


def test_export_and_import_match_cli(cache_copy, tmp_path):
    snap = tmp_path / "snap.db"
    with megajit.Cache(cache_copy) as c:
        c.export(snap)
    assert snap.exists()
    cli_snap = tmp_path / "cli-snap.db"
    cli("cache", "export", cli_snap, "--cache", cache_copy)
    with megajit.Cache(tmp_path / "fresh") as fresh:
        assert fresh.import_(snap) == 4
        assert getattr(fresh, "import")(snap) == 0  # existing keys win
    cli("cache", "import", cli_snap, "--cache", tmp_path / "fresh-cli")
    assert keys(ls_json(tmp_path / "fresh")) == keys(ls_json(tmp_path / "fresh-cli")) == keys(ls_json(cache_copy))
    with megajit.Cache(cache_copy) as c:
        with pytest.raises(megajit.Error) as e:
            c.export(tmp_path / "no" / "such" / "dir" / "x.db")
        assert e.value.message
        with pytest.raises(megajit.Error):
            c.import_(tmp_path / "absent.db")
        with pytest.raises(megajit.InvalidArgument):
            c.export("")


def test_missing_cache_is_empty_and_created_by_nothing(tmp_path):
    where = tmp_path / "never"
    with megajit.Cache(where) as c:
        assert c.ls() == [] and c.verify().checked == 0
        assert c.rm(all=True) == 0
        assert c.stat().entries == 0
    assert not where.exists()
    with megajit.Cache(where, create=True) as c:
        assert os.path.exists(c.path)


def test_read_only_cache_refuses_writes(cache_copy):
    with megajit.Cache(cache_copy, read_only=True) as c:
        with pytest.raises(megajit.Error):
            c.rm(all=True)
    assert len(ls_json(cache_copy)) == 4


def test_info_matches_cli(cache_copy):
    with megajit.Runtime(cache_dir=cache_copy) as rt:
        info = dataclasses.asdict(rt.info())
    theirs = cli_json("info", "--json", "--cache", cache_copy)
    if not same_nvrtc_as_cli():  # PyTorch loaded its own NVRTC into this process
        assert info.pop("nvrtc_version") and theirs.pop("nvrtc_version")
    assert info == theirs
