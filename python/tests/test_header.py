"""The ctypes declarations (megajit._capi) against the compiled header: a C
program built here prints sizeof/alignof/offsetof of every public struct, the
value of every enum constant and the bytes of every MJ_*_INIT initializer; a
second translation unit assigns every function to a pointer of the type the
Python table declares, with -Werror, so a drifted signature fails to compile."""

import ctypes
import dataclasses
import re
import subprocess

import pytest

from conftest import REPO

import megajit
from megajit import _capi

HEADER = REPO / "include" / "megajit.h"
GCC = ["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", f"-I{REPO / 'include'}"]


def header_text():
    return HEADER.read_text()


def compile_and_run(tmp_path, source):
    src = tmp_path / "layout.c"
    src.write_text(source)
    exe = tmp_path / "layout"
    subprocess.run([*GCC, "-o", str(exe), str(src)], check=True, capture_output=True, text=True)
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout


def layout_program():
    lines = [
        "#include <stdalign.h>",
        "#include <stddef.h>",
        "#include <stdio.h>",
        "#include <megajit.h>",
        "static void bytes(const char *name, const void *p, size_t n) {",
        '    printf("init %s ", name);',
        "    for (size_t i = 0; i < n; i++) printf(\"%02x\", ((const unsigned char *)p)[i]);",
        '    printf("\\n");',
        "}",
    ]
    for cls, (c_name, init) in _capi.STRUCTS.items():
        if init:
            lines.append(f"static const {c_name} init_{c_name} = {init};")
    lines.append("int main(void) {")
    for cls, (c_name, init) in _capi.STRUCTS.items():
        lines.append(f'    printf("struct {c_name} %zu %zu\\n", sizeof({c_name}), alignof({c_name}));')
        for field, _ in cls._fields_:
            lines.append(
                f'    printf("field {c_name} {field} %zu %zu\\n", offsetof({c_name}, {field}), '
                f"sizeof((({c_name} *)0)->{field}));"
            )
        if init:
            lines.append(f'    bytes("{c_name}", &init_{c_name}, sizeof init_{c_name});')
    for enum_cls, (c_enum, prefix) in _capi.ENUMS.items():
        lines.append(f'    printf("enumsize {c_enum} %zu\\n", sizeof({c_enum}));')
        for member in enum_cls:
            c_const = prefix + member.name
            lines.append(f'    printf("enum {c_const} %lld\\n", (long long){c_const});')
    lines.append("    return 0;")
    lines.append("}")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    out = compile_and_run(tmp_path_factory.mktemp("layout"), layout_program())
    structs, fields, inits, enums, enum_sizes = {}, {}, {}, {}, {}
    for line in out.splitlines():
        kind, *rest = line.split()
        if kind == "struct":
            structs[rest[0]] = (int(rest[1]), int(rest[2]))
        elif kind == "field":
            fields[(rest[0], rest[1])] = (int(rest[2]), int(rest[3]))
        elif kind == "init":
            inits[rest[0]] = bytes.fromhex(rest[1])
        elif kind == "enum":
            enums[rest[0]] = int(rest[1])
        elif kind == "enumsize":
            enum_sizes[rest[0]] = int(rest[1])
    return structs, fields, inits, enums, enum_sizes


@pytest.mark.parametrize("cls", list(_capi.STRUCTS), ids=lambda c: _capi.STRUCTS[c][0])
def test_struct_layout(layout, cls):
    structs, fields, _, _, _ = layout
    c_name = _capi.STRUCTS[cls][0]
    assert structs[c_name] == (ctypes.sizeof(cls), ctypes.alignment(cls)), c_name
    for field, _ in cls._fields_:
        desc = getattr(cls, field)
        assert fields[(c_name, field)] == (desc.offset, desc.size), f"{c_name}.{field}"


def test_every_struct_field_is_mirrored():
    """Each struct body in the header has exactly the fields of its ctypes class, in order."""
    text = header_text()
    for cls, (c_name, _) in _capi.STRUCTS.items():
        m = re.search(r"typedef struct %s \{(.*?)\n\} %s;" % (c_name, c_name), text, re.S)
        assert m, c_name
        body = re.sub(r"/\*.*?\*/", "", m.group(1), flags=re.S)
        names = [re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:\[[^\]]*\])?\s*$", decl.strip())[0]
                 for decl in body.split(";") if decl.strip()]
        assert names == [f for f, _ in cls._fields_], c_name


@pytest.mark.parametrize("plain,ctype", [(megajit.MoEConfig, _capi.MoeConfig), (megajit.SymmConfig, _capi.SymmConfig)],
                         ids=["MoEConfig", "SymmConfig"])
def test_configs_carry_every_struct_field(plain, ctype):
    """The config a user fills has a field for every field of its C struct but
    struct_size: the struct is built from the dataclass alone (_args.c_struct), so a
    field missing there would reach C as 0 whatever the user asked for (the shared
    expert's fields, say)."""
    assert {f.name for f in dataclasses.fields(plain)} == {f for f, _ in ctype._fields_} - {"struct_size"}


def test_every_struct_is_mirrored():
    declared = set(re.findall(r"typedef struct (mj_[a-z_]+) \{", header_text()))
    assert declared == {c for c, _ in _capi.STRUCTS.values()}


@pytest.mark.parametrize("cls", [c for c, (_, init) in _capi.STRUCTS.items() if init],
                         ids=lambda c: _capi.STRUCTS[c][1])
def test_init_macros(layout, cls):
    """RuntimeOptions() etc. hold the bytes MJ_*_INIT gives (struct_size, defaults)."""
    c_name = _capi.STRUCTS[cls][0]
    assert bytes(cls()) == layout[2][c_name]


def test_enum_values(layout):
    enums, sizes = layout[3], layout[4]
    for enum_cls, (_, prefix) in _capi.ENUMS.items():
        for member in enum_cls:
            assert enums[prefix + member.name] == int(member), prefix + member.name
    assert set(sizes.values()) == {ctypes.sizeof(ctypes.c_int)}


def test_every_enum_is_mirrored():
    declared = set(re.findall(r"typedef enum (mj_[a-z_]+) \{", header_text()))
    assert declared == {c for c, _ in _capi.ENUMS.values()}


def test_every_enum_constant_is_mirrored():
    declared = set(re.findall(r"\b(MJ_[A-Z0-9_]+)\s*=\s*-?\d+", header_text()))
    declared = {c for c in declared if not c.endswith("COUNT_")}
    mirrored = {prefix + m.name for e, (_, prefix) in _capi.ENUMS.items() for m in e}
    assert declared == mirrored


def declared_functions():
    text = "\n".join(line for line in header_text().splitlines() if not line.lstrip().startswith("#"))
    flat = " ".join(text.split())
    return set(re.findall(r"MJ_API [^;(]*?([A-Za-z_][A-Za-z0-9_]*)\s*\(", flat))


def test_every_function_is_declared():
    assert declared_functions() == set(_capi.FUNCTIONS)


def test_signatures_compile_against_header(tmp_path):
    lines = ["#include <megajit.h>"]
    for i, (name, (ret, params)) in enumerate(_capi.FUNCTIONS.items()):
        lines.append(f"{ret} (*p{i})({', '.join(params) or 'void'}) = {name};")
    src = tmp_path / "signatures.c"
    src.write_text("\n".join(lines) + "\n")
    p = subprocess.run([*GCC, "-fsyntax-only", str(src)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_a_wrong_signature_is_caught(tmp_path):
    """Negative control: the compile check rejects a parameter type that drifted."""
    src = tmp_path / "wrong.c"
    src.write_text("#include <megajit.h>\nmj_status (*p)(mj_runtime *, mj_family, long) = mj_family_set_num_sms;\n")
    assert subprocess.run([*GCC, "-fsyntax-only", str(src)], capture_output=True).returncode != 0


@pytest.mark.parametrize("name", ["mj_moe_forward", "mj_pre_dispatch", "mj_mega_moe"])
def test_forward_entry_points(name):
    """The calls MegaMoE.forward and its tests make are declared from the header,
    and every pointer parameter travels pointer-sized, so a data_ptr() int above
    2**31 passes whole (ctypes would truncate an undeclared int to a C int)."""
    assert name in declared_functions()
    ret, params = _capi.FUNCTIONS[name]
    fn = getattr(megajit._lib.load(), name)
    assert fn.restype is ctypes.c_int
    assert fn.argtypes == [_capi.ctype_of(p) for p in params]
    for c_type, ctype in zip(params, fn.argtypes):
        if "*" in c_type or c_type == "mj_stream":
            assert ctypes.sizeof(ctype) == ctypes.sizeof(ctypes.c_void_p), c_type
        else:
            assert ctype is ctypes.c_int, c_type


def test_ctypes_mapping_covers_every_signature():
    for name, (ret, params) in _capi.FUNCTIONS.items():
        _capi.ctype_of(ret)
        for p in params:
            _capi.ctype_of(p)
