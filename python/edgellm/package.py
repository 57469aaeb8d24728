"""package.py — signed model packages from Python: ``verify()`` and ``store_active()``.

Contract: a ctypes binding of libedgellm-package (include/edgellm_package.h),
loaded on first use — EDGELLM_PACKAGE_LIBRARY (a path), else
libedgellm-package.so.0 beside EDGELLM_LIBRARY's library, else through the
dynamic loader; when none loads, ``PackageLibraryNotFound`` (an ImportError)
says so and how to fix it. ``verify(model, manifest=None, pub=..., store=...)``
makes the decision ``edgellm verify`` makes (same checks, order, names and
codes) and returns a ``PackageInfo``; a failed check raises the
``PackageError`` subclass for that check (``HashError``, ``KeyCheckError``,
``ExpiredError``, ...), carrying ``check`` (the CLI's name: "hash", "key",
"expiry", ...), ``code`` (the enum value), ``exit_code`` (the CLI's exit
status) and the library's message. Importing ``edgellm`` never needs this
library.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
from ctypes import POINTER, Structure, c_bool, c_char, c_char_p, c_int, c_int64, c_uint8, c_void_p
from dataclasses import dataclass
from typing import Optional, Union

ABI_VERSION = 0
PathLike = Union[str, "os.PathLike[str]"]


class PackageLibraryNotFound(ImportError):
    """libedgellm-package could not be loaded (not installed, or not on the loader's path)."""


class el_package_error(Structure):
    _fields_ = [("check", c_int), ("msg", c_char * 512)]


class el_package_params(Structure):
    _fields_ = [("manifest", c_char_p), ("pub", c_char_p), ("store", c_char_p), ("min_version", c_int64),
                ("now", c_int64), ("smoke", c_bool), ("reserved", c_void_p * 8)]


class el_package_info(Structure):
    _fields_ = [("name", c_char * 128), ("version", c_int64), ("key_id", c_char * 17), ("sha256", c_char * 65),
                ("quant", c_char * 16), ("arch", c_char * 32), ("expires", c_char * 24), ("expires_t", c_int64),
                ("model_path", c_char * 4096), ("summary", c_char * 1024), ("reserved", c_uint8 * 256)]


_plib = None


def _candidates():
    path = os.environ.get("EDGELLM_PACKAGE_LIBRARY")
    if path:
        return [path]
    out = []
    core = os.environ.get("EDGELLM_LIBRARY")
    if core:
        out.append(os.path.join(os.path.dirname(core), "libedgellm-package.so.%d" % ABI_VERSION))
    out.append("libedgellm-package.so.%d" % ABI_VERSION)
    found = ctypes.util.find_library("edgellm-package")
    if found:
        out.append(found)
    return out


def _load():
    global _plib
    if _plib is not None:
        return _plib
    errors = []
    for c in _candidates():
        try:
            lib = ctypes.CDLL(c)
            break
        except OSError as e:
            errors.append(str(e))
    else:
        raise PackageLibraryNotFound(
            "package verification needs libedgellm-package (libedgellm-package.so.%d), which could not be loaded: "
            "install it with the library (cmake --install BUILD --prefix P puts it in P/lib) or set "
            "EDGELLM_PACKAGE_LIBRARY to its path (%s)" % (ABI_VERSION, "; ".join(errors) or "not found"))
    sigs = {
        "el_package_version": (c_char_p, []),
        "el_package_check_name": (c_char_p, [c_int]),
        "el_package_exit_code": (c_int, [c_int]),
        "el_package_verify": (c_int, [c_char_p, POINTER(el_package_params), POINTER(el_package_info),
                                      POINTER(el_package_error)]),
        "el_package_store_active": (c_int, [c_char_p, c_bool, POINTER(el_package_info), POINTER(el_package_error)]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    _plib = lib
    return lib


# ---- exceptions: one class per check -------------------------------------------

class PackageError(Exception):
    """A package check failed. ``check`` is its name as the CLI prints it, ``code`` the
    el_package_check value, ``exit_code`` the status ``edgellm verify`` exits with."""
    check = "?"

    def __init__(self, message: str, check: str, code: int, exit_code: int):
        super().__init__(message)
        self.message = message
        self.check = check
        self.code = code
        self.exit_code = exit_code

    def __str__(self) -> str:
        return f"{self.check} check failed: {self.message}"


class IOCheckError(PackageError):
    """"io": a file could not be read."""


class ManifestError(PackageError):
    """"manifest": no manifest, not strict JSON, a field wrong, or a manifest for another file."""


class KeyCheckError(PackageError):
    """"key": signed only by keys that are not trusted, or no trusted key given."""


class SignatureError(PackageError):
    """"signature": a trusted key's signature does not verify (altered or forged manifest)."""


class ExpiredError(PackageError):
    """"expiry": the manifest's expiry time has passed."""


class VersionError(PackageError):
    """"version": lower than the floor (min_version or the store's active version)."""


class RuntimeVersionError(PackageError):
    """"runtime": the package needs a newer runtime."""


class DeviceError(PackageError):
    """"device": this device's class is not listed."""


class SizeError(PackageError):
    """"size": an artifact is truncated, extended or missing."""


class HashError(PackageError):
    """"hash": an artifact's SHA-256 differs from the manifest's."""


class SmokeError(PackageError):
    """"smoke": the greedy smoke test gave other tokens than recorded."""


class SpaceError(PackageError):
    """"space": not enough free space (store installs)."""


class StoreError(PackageError):
    """"store": no active version, or damaged store state."""


class UsageError(PackageError):
    """"usage": a bad argument (e.g. pub and store both given)."""


_BY_CODE = {1: IOCheckError, 2: ManifestError, 3: ManifestError, 4: KeyCheckError, 5: SignatureError,
            6: ExpiredError, 7: VersionError, 8: RuntimeVersionError, 9: DeviceError, 10: SizeError, 11: HashError,
            12: SmokeError, 13: SpaceError, 14: StoreError, 15: UsageError}


@dataclass(frozen=True)
class PackageInfo:
    """A verified package: its name, version, the key that verified it, the model's
    SHA-256, quantization, architecture, expiry, the model path to load, and the
    one-line summary the CLI prints."""
    name: str
    version: int
    key_id: str
    sha256: str
    quant: str
    arch: str
    expires: str
    model_path: str
    summary: str


def _s(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def _result(lib, rc: int, info: el_package_info, err: el_package_error) -> PackageInfo:
    if rc != 0:
        cls = _BY_CODE.get(rc, PackageError)
        raise cls(_s(err.msg), _s(lib.el_package_check_name(rc)), rc, int(lib.el_package_exit_code(rc)))
    return PackageInfo(_s(info.name), int(info.version), _s(info.key_id), _s(info.sha256), _s(info.quant),
                       _s(info.arch), _s(info.expires), _s(info.model_path), _s(info.summary))


def _path(p: Optional[PathLike], what: str) -> Optional[bytes]:
    if p is None:
        return None
    b = os.fsencode(p)
    if not b or b"\0" in b:
        raise ValueError(f"{what}: an empty path or a NUL byte in it")
    return b


def verify(model: PathLike, manifest: Optional[PathLike] = None, *, pub: Optional[PathLike] = None,
           store: Optional[PathLike] = None, min_version: int = 0, now: Optional[int] = None,
           smoke: bool = False) -> PackageInfo:
    """Verify the signed package of ``model`` before loading it.

    ``manifest``: the manifest file (default ``model + ".manifest.json"``). The trusted
    key is ``pub`` (a ``.pub`` file) or the store ``store``'s own key (the store's active
    version is then the version floor); give exactly one. ``min_version`` adds a floor,
    ``now`` (seconds since the epoch) replaces the clock for the expiry check, ``smoke``
    also runs the manifest's greedy smoke test. Returns a ``PackageInfo``; raises the
    ``PackageError`` subclass of the first failed check."""
    lib = _load()
    if not isinstance(min_version, int) or min_version < 0:
        raise ValueError("min_version must be an integer >= 0")
    if now is not None and (not isinstance(now, int) or now <= 0):
        raise ValueError("now must be a positive integer (seconds since the epoch)")
    p = el_package_params()
    p.manifest = _path(manifest, "manifest")
    p.pub = _path(pub, "pub")
    p.store = _path(store, "store")
    p.min_version = min_version
    p.now = now or 0
    p.smoke = bool(smoke)
    info, err = el_package_info(), el_package_error()
    rc = lib.el_package_verify(_path(model, "model"), ctypes.byref(p), ctypes.byref(info), ctypes.byref(err))
    return _result(lib, rc, info, err)


def store_active(store: PathLike, *, smoke: bool = False) -> PackageInfo:
    """The active version of the model store ``store`` (``edgellm install --store``),
    verified against the store's key; load ``.model_path``."""
    lib = _load()
    info, err = el_package_info(), el_package_error()
    rc = lib.el_package_store_active(_path(store, "store"), bool(smoke), ctypes.byref(info), ctypes.byref(err))
    return _result(lib, rc, info, err)


def library_version() -> str:
    """libedgellm-package's version (compare with edgellm.version())."""
    return _s(_load().el_package_version())
