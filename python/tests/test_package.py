"""test_package.py — edgellm.verify() / store_active() against libedgellm-package and the CLI.

Asserts: the ctypes structs have edgellm_package.h's sizes and offsets; a
package signed by `edgellm sign` verifies (name, version, key id, the file's
SHA-256, the model path) and the verified model loads; a flipped model byte
raises HashError, a wrong key KeyCheckError, an expired manifest (the clock
past `expires`) ExpiredError, an altered signed field SignatureError, a
missing manifest ManifestError, a version floor VersionError, pub+store
UsageError — each carrying the CLI's check name and the exit status
`edgellm verify` gives for the same package; an explicit manifest path is
used; the store's active model resolves and a package verifies against the
store's key; a missing package library is a clear PackageLibraryNotFound.
Environment: EDGELLM_PACKAGE_LIBRARY / EDGELLM_LIBRARY, EL_CLI_PATH, EL_FIXTURE_DIR.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

import edgellm
from conftest import CLI, SHARED, check_struct_layout, need_fixture
from edgellm import package as _pkg

TINY = os.path.join(SHARED, "reference/models/tiny-llama-Q8_0.gguf")
EXPIRES = "2030-01-01"  # 1893456000


def run_cli(*args, ok=True):
    r = subprocess.run([CLI, *args], capture_output=True, text=True, timeout=300)
    if ok:
        assert r.returncode == 0, r.stderr
    return r


@pytest.fixture(scope="module")
def pkg():
    if not CLI:
        pytest.skip("EL_CLI_PATH not set")
    need_fixture(TINY)
    d = tempfile.mkdtemp(prefix="el-pytest-pkg-")
    model = os.path.join(d, "tiny.gguf")
    shutil.copyfile(TINY, model)
    out = run_cli("keygen", "--out", os.path.join(d, "release")).stdout
    run_cli("keygen", "--out", os.path.join(d, "other"))
    run_cli("sign", "--key", os.path.join(d, "release.sec"), model, "--version", "2", "--expires", EXPIRES,
            "--smoke-n", "4")
    yield {"dir": d, "model": model, "pub": os.path.join(d, "release.pub"), "other": os.path.join(d, "other.pub"),
           "keyid": out.split()[-1]}
    shutil.rmtree(d, ignore_errors=True)


def copy_pkg(pkg, name):
    """A fresh copy of the signed package (model + manifest) under its own folder."""
    d = os.path.join(pkg["dir"], name)
    os.makedirs(d)
    for f in ["tiny.gguf", "tiny.gguf.manifest.json"]:
        shutil.copyfile(os.path.join(pkg["dir"], f), os.path.join(d, f))
    return os.path.join(d, "tiny.gguf")


def expect(exc, check, fn, cli_args=None):
    with pytest.raises(exc) as ei:
        fn()
    e = ei.value
    assert isinstance(e, edgellm.PackageError)
    assert e.check == check and e.exit_code == 10 + e.code, (e.check, e.code, e.exit_code)
    assert str(e).startswith(f"{check} check failed: ") and e.message
    if cli_args is not None:
        r = run_cli("verify", *cli_args, ok=False)
        assert r.returncode == e.exit_code, (r.returncode, r.stderr)
        assert f"error: {check} check failed:" in r.stderr
    return e


LAYOUT_C = r"""
#include <stddef.h>
#include <stdio.h>
#include "edgellm_package.h"
#define S(t) printf(#t " %zu\n", sizeof(t));
#define O(t, f) printf(#t "." #f " %zu\n", offsetof(t, f));
int main(void) {
    S(el_package_error) O(el_package_error, msg)
    S(el_package_params) O(el_package_params, min_version) O(el_package_params, smoke) O(el_package_params, reserved)
    S(el_package_info) O(el_package_info, version) O(el_package_info, expires_t) O(el_package_info, model_path)
    O(el_package_info, summary) O(el_package_info, reserved)
    return 0;
}
"""


def test_struct_layout_matches_header():
    assert check_struct_layout(LAYOUT_C, _pkg) == 12


def test_library_version():
    assert edgellm.package.library_version() == edgellm.version()


def test_good_package_verifies_and_loads(pkg):
    info = edgellm.verify(pkg["model"], pub=pkg["pub"])
    assert info.name == "tiny" and info.version == 2
    assert info.key_id == pkg["keyid"]
    assert info.sha256 == hashlib.sha256(open(pkg["model"], "rb").read()).hexdigest()
    assert info.model_path == pkg["model"] and info.arch == "llama" and info.quant == "Q8_0"
    assert info.expires == "2030-01-01T00:00:00Z"
    assert info.summary.startswith("package tiny v2, signature verified (key " + pkg["keyid"])
    assert edgellm.verify(pkg["model"], pub=pkg["pub"], smoke=True, min_version=2).version == 2
    with edgellm.Model(info.model_path) as m:
        assert m.tokenize("Hello") == m.tokenize("Hello") and len(m.tokenize("Hello")) > 0


def test_flipped_byte_is_a_hash_error(pkg):
    model = copy_pkg(pkg, "flip")
    data = bytearray(open(model, "rb").read())
    data[len(data) - 100] ^= 0x20
    open(model, "wb").write(bytes(data))
    e = expect(edgellm.HashError, "hash", lambda: edgellm.verify(model, pub=pkg["pub"]),
               ["--pub", pkg["pub"], model])
    assert e.exit_code == 21 and "SHA-256" in e.message


def test_truncated_model_is_a_size_error(pkg):
    model = copy_pkg(pkg, "trunc")
    os.truncate(model, os.path.getsize(model) - 1)
    expect(edgellm.SizeError, "size", lambda: edgellm.verify(model, pub=pkg["pub"]), ["--pub", pkg["pub"], model])


def test_wrong_key_is_a_key_error(pkg):
    e = expect(edgellm.KeyCheckError, "key", lambda: edgellm.verify(pkg["model"], pub=pkg["other"]),
               ["--pub", pkg["other"], pkg["model"]])
    assert e.exit_code == 14
    expect(edgellm.KeyCheckError, "key", lambda: edgellm.verify(pkg["model"]))  # no key at all


def test_expired_manifest(pkg):
    e = expect(edgellm.ExpiredError, "expiry", lambda: edgellm.verify(pkg["model"], pub=pkg["pub"], now=1893456000))
    assert e.exit_code == 16 and "2030-01-01T00:00:00Z" in e.message
    assert edgellm.verify(pkg["model"], pub=pkg["pub"], now=1893455999).version == 2


def test_altered_manifest_is_a_signature_error(pkg):
    model = copy_pkg(pkg, "alter")
    mf = model + ".manifest.json"
    doc = json.loads(open(mf).read())
    assert doc["signed"]["version"] == 2
    doc["signed"]["version"] = 9
    open(mf, "w").write(json.dumps(doc))
    expect(edgellm.SignatureError, "signature", lambda: edgellm.verify(model, pub=pkg["pub"]),
           ["--pub", pkg["pub"], model])


def test_manifest_path(pkg):
    model = copy_pkg(pkg, "mpath")
    elsewhere = os.path.join(pkg["dir"], "manifests")
    os.makedirs(elsewhere)
    moved = os.path.join(elsewhere, "tiny.json")
    os.rename(model + ".manifest.json", moved)
    e = expect(edgellm.ManifestError, "manifest", lambda: edgellm.verify(model, pub=pkg["pub"]),
               ["--pub", pkg["pub"], model])
    assert e.code == 2
    assert edgellm.verify(model, moved, pub=pkg["pub"]).version == 2
    other = copy_pkg(pkg, "mpath-other")
    os.rename(other, other.replace("tiny.gguf", "renamed.gguf"))
    e = expect(edgellm.ManifestError, "manifest",
               lambda: edgellm.verify(other.replace("tiny.gguf", "renamed.gguf"), moved, pub=pkg["pub"]))
    assert e.code == 3 and "not \"renamed.gguf\"" in e.message


def test_version_floor_and_usage(pkg):
    e = expect(edgellm.VersionError, "version", lambda: edgellm.verify(pkg["model"], pub=pkg["pub"], min_version=3))
    assert e.exit_code == 17
    expect(edgellm.UsageError, "usage", lambda: edgellm.verify(pkg["model"], pub=pkg["pub"], store=pkg["dir"]))
    with pytest.raises(ValueError):
        edgellm.verify("a\0b", pub=pkg["pub"])
    with pytest.raises(ValueError):
        edgellm.verify(pkg["model"], pub=pkg["pub"], min_version=-1)


def test_store(pkg):
    store = os.path.join(pkg["dir"], "store")
    expect(edgellm.StoreError, "store", lambda: edgellm.store_active(store))
    run_cli("install", pkg["model"], "--store", store, "--pub", pkg["pub"])
    info = edgellm.store_active(store)
    assert info.version == 2 and info.model_path.startswith(os.path.join(store, "slots")) and \
        info.model_path.endswith("/tiny.gguf")
    assert info.sha256 == hashlib.sha256(open(pkg["model"], "rb").read()).hexdigest()
    assert edgellm.store_active(store, smoke=True).model_path == info.model_path
    # a package checked against the store's key and its active version as the floor
    assert edgellm.verify(pkg["model"], store=store).key_id == pkg["keyid"]
    # the store's copy altered: refused
    data = bytearray(open(info.model_path, "rb").read())
    data[-1] ^= 1
    os.chmod(info.model_path, 0o644)
    open(info.model_path, "wb").write(bytes(data))
    expect(edgellm.HashError, "hash", lambda: edgellm.store_active(store))


def test_missing_library_is_a_clear_error():
    code = ("import edgellm\n"
            "try:\n    edgellm.verify('m.gguf', pub='k.pub')\n"
            "except edgellm.PackageLibraryNotFound as e:\n    print('NOTFOUND', e)\n")
    env = dict(os.environ, EDGELLM_PACKAGE_LIBRARY="/nonexistent/libedgellm-package.so.0")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("NOTFOUND package verification needs libedgellm-package") and \
        "EDGELLM_PACKAGE_LIBRARY" in r.stdout
    assert issubclass(edgellm.PackageLibraryNotFound, ImportError)
