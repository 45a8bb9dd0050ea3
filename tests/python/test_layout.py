# SPDX-License-Identifier: Apache-2.0
"""The ctypes structs are the compiler's layout of space.h, and the constants are the header's."""

import ctypes
import json
import os
import subprocess

import pytest

from libspace import _lib


@pytest.fixture(scope="module")
def layout():
    out = subprocess.run([os.environ["SPACE_PY_LAYOUT"]], check=True, capture_output=True).stdout
    return json.loads(out)


def test_every_struct_matches_the_header(layout):
    assert set(layout["structs"]) == set(_lib.STRUCTS)
    for name, cls in _lib.STRUCTS.items():
        c = layout["structs"][name]
        ours = {f[0]: [getattr(cls, f[0]).offset, getattr(cls, f[0]).size] for f in cls._fields_}
        assert ours == c["fields"], f"struct {name}: the binding's fields differ from space.h's"
        # A field added to space.h grows the struct: the binding must declare it (and its version).
        assert ctypes.sizeof(cls) == c["size"], f"struct {name}: {ctypes.sizeof(cls)} bytes here, {c['size']} in space.h"


def test_constants_match_the_header(layout):
    for name, value in layout["constants"].items():
        if name == "SIZEOF_BOOL":
            assert ctypes.sizeof(ctypes.c_bool) == value
        elif name == "SANDBOX_CREATING":
            assert _lib.SANDBOX_STATUS[value] == "creating"
        elif name == "SANDBOX_DESTROYED":
            assert _lib.SANDBOX_STATUS[value] == "destroyed"
        else:
            assert getattr(_lib, name) == value, f"{name}: {getattr(_lib, name)} here, {value} in space.h"


def test_options_init_writes_the_versions_we_declare():
    # The library's own init fills our struct of that version (never a zero-filled one, docs/api.md).
    o = _lib.ExecOptions()
    assert _lib.lib.space_exec_options_init(ctypes.byref(o), _lib.EXEC_OPTIONS_VERSION) == 0
    assert o.version == _lib.EXEC_OPTIONS_VERSION and o.stdin_fd == -1 and o.flags == 0
    for fn, cls, v in [("space_ctx_options_init", _lib.CtxOptions, _lib.CTX_OPTIONS_VERSION),
                       ("space_init_options_init", _lib.InitOptions, _lib.INIT_OPTIONS_VERSION),
                       ("space_template_import_options_init", _lib.TemplateImportOptions,
                        _lib.TEMPLATE_IMPORT_OPTIONS_VERSION),
                       ("space_sandbox_options_init", _lib.SandboxOptions, _lib.SANDBOX_OPTIONS_VERSION),
                       ("space_read_options_init", _lib.ReadOptions, _lib.READ_OPTIONS_VERSION),
                       ("space_checkpoint_fork_options_init", _lib.CheckpointForkOptions,
                        _lib.CHECKPOINT_FORK_OPTIONS_VERSION),
                       ("space_event_query_init", _lib.EventQuery, _lib.EVENT_QUERY_VERSION)]:
        o = cls()
        assert getattr(_lib.lib, fn)(ctypes.byref(o), v) == 0, fn
        assert o.version == v, fn
        # version 0 (a struct nobody initialized) and one from the future are refused
        assert getattr(_lib.lib, fn)(ctypes.byref(cls()), 0) < 0, fn
        assert getattr(_lib.lib, fn)(ctypes.byref(cls()), v + 1000) < 0, fn
