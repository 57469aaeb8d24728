#!/usr/bin/env python3
"""test_install.py — the installed library, used the three ways an app would.

Contract: `cmake --install BUILD --prefix P` (P a temporary directory) puts
bin/edgellm, include/edgellm.h, lib*/libedgellm.so -> .so.ABI -> .so.VERSION,
lib*/libedgellm.a, the pkg-config file and the CMake package under P. The
examples (examples/*.c) then build with `pkg-config` (shared, and a static
link of libedgellm.a with `--static`), and with CMake `find_package(edgellm)`
(edgellm::edgellm, edgellm::edgellm_static), warning-free; each runs on a tiny
reference model and its output is checked: greedy text equal to the installed
`edgellm run --temp 0`, cancellation after exactly K tokens, a stop string
that cuts the text where it first occurs, a chat turn whose reply equals
`edgellm run` on the rendered prompt, log lines routed to the app, and (verify.c, linked with
libedgellm-package too: its .so, .a, header and edgellm-package.pc) a
signed package that verifies and loads, a flipped model byte refused by the
hash check, a wrong key by the key check (each with the CLI's exit status),
and a store's active model resolved and loaded. The
prefix is then moved and pkg-config still finds it (relocatable .pc).
Environment: EL_BUILD_DIR, EL_SOURCE_DIR, EL_FIXTURE_DIR, CMAKE_COMMAND.
Exit 0 ok, 1 failure, 77 skipped (no reference models, no pkg-config/cc).
"""
import glob
import os
import shutil
import subprocess
import sys
import tempfile

BUILD = os.environ["EL_BUILD_DIR"]
SRC = os.environ["EL_SOURCE_DIR"]
sys.path.insert(0, os.path.join(SRC, "tests", "fixtures"))
import fixtures  # noqa: E402  (tests/fixtures/fixtures.py)

SHARED = fixtures.fixture_dir()
CMAKE = os.environ.get("CMAKE_COMMAND", "cmake")
EXAMPLES = ["generate", "cancel", "stop", "chat", "log"]
fails = 0


def check(cond, what):
    global fails
    if not cond:
        fails += 1
        print("FAIL:", what)
    return cond


def run(cmd, env=None, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, **kw)
    if r.returncode != 0:
        print("$", " ".join(cmd), "->", r.returncode, "\n", r.stdout[-2000:], r.stderr[-3000:])
    return r


def main():
    llama = os.path.join(SHARED, "reference/models/tiny-llama-Q8_0.gguf")
    gemma = os.path.join(SHARED, "reference/models/tiny-gemma3-Q8_0.gguf")
    if not os.path.exists(llama) or not os.path.exists(gemma):
        fixtures.missing(llama if not os.path.exists(llama) else gemma)
    if not shutil.which("pkg-config") or not shutil.which("cc"):
        print("pkg-config or cc missing: skipped")
        return 77
    tmp = tempfile.mkdtemp(prefix="el-install-")
    try:
        return body(tmp, llama, gemma)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def body(tmp, llama, gemma):
    prefix = os.path.join(tmp, "prefix")
    r = run([CMAKE, "--install", BUILD, "--prefix", prefix])
    if not check(r.returncode == 0, "cmake --install"):
        return 1
    version = run([os.path.join(BUILD, "edgellm"), "--version"]).stdout.split()[-1]
    libdirs = [d for d in glob.glob(os.path.join(prefix, "lib*")) if os.path.isdir(d)]
    check(len(libdirs) == 1, f"one library directory under the prefix: {libdirs}")
    libdir = libdirs[0]
    so = os.path.join(libdir, "libedgellm.so")
    for rel in ["bin/edgellm", "include/edgellm.h"]:
        check(os.path.isfile(os.path.join(prefix, rel)), f"installed {rel}")
    check(os.path.islink(so) and os.readlink(so) == "libedgellm.so.0", "libedgellm.so -> libedgellm.so.0")
    check(os.path.islink(so + ".0") and os.readlink(so + ".0") == f"libedgellm.so.{version}",
          f"libedgellm.so.0 -> libedgellm.so.{version}")
    check(os.path.isfile(os.path.join(libdir, "libedgellm.a")), "libedgellm.a")
    check(os.path.isfile(os.path.join(libdir, "pkgconfig/edgellm.pc")), "edgellm.pc")
    check(os.path.isfile(os.path.join(libdir, "cmake/edgellm/edgellmConfig.cmake")), "edgellmConfig.cmake")
    pso = os.path.join(libdir, "libedgellm-package.so")
    check(os.path.isfile(os.path.join(prefix, "include/edgellm_package.h")), "installed include/edgellm_package.h")
    check(os.path.islink(pso) and os.readlink(pso) == "libedgellm-package.so.0", "libedgellm-package.so -> .so.0")
    check(os.path.islink(pso + ".0") and os.readlink(pso + ".0") == f"libedgellm-package.so.{version}",
          f"libedgellm-package.so.0 -> libedgellm-package.so.{version}")
    check(os.path.isfile(os.path.join(libdir, "libedgellm-package.a")), "libedgellm-package.a")
    check(os.path.isfile(os.path.join(libdir, "pkgconfig/edgellm-package.pc")), "edgellm-package.pc")
    check(run([os.path.join(prefix, "bin/edgellm"), "--version"]).stdout.strip() == f"edgellm {version}",
          "installed edgellm --version")
    # the static archive holds the core only: no service/convert objects
    members = run(["ar", "t", os.path.join(libdir, "libedgellm.a")]).stdout.split()
    check(not any(m.startswith(("server", "manifest", "store", "pack")) for m in members),
          f"libedgellm.a is the core runtime only: {members}")

    env = dict(os.environ, PKG_CONFIG_PATH=os.path.join(libdir, "pkgconfig"))
    pc = lambda *a: run(["pkg-config", *a, "edgellm"], env=env).stdout.split()
    check(pc("--modversion") == [version], f"pkg-config --modversion = {version}")
    static_libs = pc("--static", "--libs")
    check("-lpcre2-8" in static_libs and "-lm" in static_libs and "-pthread" in static_libs,
          f"pkg-config --static --libs lists PCRE2, libm, pthreads: {static_libs}")
    check("-lpcre2-8" not in pc("--libs"), "shared link does not need PCRE2 on the command line")

    # ---- builds: pkg-config (shared), pkg-config (static), CMake (shared and static) ----
    bins = {}
    out = os.path.join(tmp, "pc")
    os.makedirs(out)
    cflags, libs = pc("--cflags"), pc("--libs")
    for ex in EXAMPLES:
        exe = os.path.join(out, ex)
        r = run(["cc", "-std=c17", "-Wall", "-Wextra", "-Werror", os.path.join(SRC, "examples", ex + ".c"), "-o", exe,
                 *cflags, *libs, f"-Wl,-rpath,{libdir}", "-pthread"])
        check(r.returncode == 0, f"pkg-config build of {ex}")
    pcp = lambda *a: run(["pkg-config", *a, "edgellm-package"], env=env).stdout.split()
    check(pcp("--modversion") == [version], f"pkg-config edgellm-package --modversion = {version}")
    pstatic = pcp("--static", "--libs")
    check("-lsodium" in pstatic and "-lcjson" in pstatic and "-ledgellm" in pstatic,
          f"pkg-config --static --libs edgellm-package lists libedgellm, libsodium, cJSON: {pstatic}")
    check("-lsodium" not in pcp("--libs"), "a shared link of libedgellm-package does not need libsodium on the line")
    r = run(["cc", "-std=c17", "-Wall", "-Wextra", "-Werror", os.path.join(SRC, "examples/verify.c"), "-o",
             os.path.join(out, "verify"), *pcp("--cflags"), *pcp("--libs"), *libs, f"-Wl,-rpath,{libdir}"])
    check(r.returncode == 0, "pkg-config build of verify (edgellm-package + edgellm)")
    archives = {"-ledgellm-package": os.path.join(libdir, "libedgellm-package.a"),
                "-ledgellm": os.path.join(libdir, "libedgellm.a")}
    exe = os.path.join(tmp, "verify-static")
    r = run(["cc", "-std=c17", "-Wall", "-Wextra", "-Werror", os.path.join(SRC, "examples/verify.c"), "-o", exe,
             *pcp("--cflags"), *[archives.get(a, a) for a in pstatic]])
    if check(r.returncode == 0, "static pkg-config build of verify"):
        dyn = run(["readelf", "-d", exe]).stdout
        check("libedgellm" not in dyn, "the static verify needs neither libedgellm .so")
    bins["pkg-config"] = out
    exe = os.path.join(tmp, "generate-static")
    r = run(["cc", "-std=c17", "-Wall", "-Wextra", "-Werror", os.path.join(SRC, "examples/generate.c"), "-o", exe,
             *cflags, "-static-libgcc", os.path.join(libdir, "libedgellm.a"), *static_libs])
    if check(r.returncode == 0, "static pkg-config build of generate"):
        dyn = run(["readelf", "-d", exe]).stdout
        check("libedgellm" not in dyn, "the static build does not need libedgellm.so")
    for kind, flag in [("cmake", "OFF"), ("cmake-static", "ON")]:
        bdir = os.path.join(tmp, kind)
        r = run([CMAKE, "-S", os.path.join(SRC, "examples"), "-B", bdir, f"-DCMAKE_PREFIX_PATH={prefix}",
                 f"-DEL_STATIC={flag}", "-DCMAKE_BUILD_TYPE=Release"])
        if check(r.returncode == 0, f"{kind}: configure with find_package(edgellm)"):
            r = run([CMAKE, "--build", bdir, "-j2"])
            check(r.returncode == 0, f"{kind}: build")
        bins[kind] = bdir
    if "cmake-static" in bins:
        dyn = run(["readelf", "-d", os.path.join(bins["cmake-static"], "generate")]).stdout
        check("libedgellm" not in dyn, "edgellm::edgellm_static links the archive")

    # ---- runs ----
    cli = os.path.join(prefix, "bin/edgellm")
    prompt = "Once upon a time"
    want = run([cli, "run", "-m", llama, "--allow-unsigned", "-p", prompt, "-n", "16", "--temp", "0"]).stdout
    check(len(want) > 10, "the CLI generated text")
    for kind, d in list(bins.items()) + [("pkg-config-static", None)]:
        exe = os.path.join(d, "generate") if d else os.path.join(tmp, "generate-static")
        if not os.path.exists(exe):
            continue
        r = run([exe, llama, prompt, "16"])
        text, _, tail = r.stdout.rpartition("\n[finish=")
        check(r.returncode == 0 and text == want and tail.startswith("2 tokens=16]"),
              f"{kind} generate == edgellm run --temp 0: {r.stdout!r} vs {want!r}")
    ex = lambda name: os.path.join(bins["pkg-config"], name)
    r = run([ex("cancel"), llama, prompt, "5"])
    check(r.returncode == 0 and "cancelled after 5 tokens" in r.stdout and "then generated 3 more" in r.stdout,
          f"cancel: {r.stdout!r}")
    stop = want[len(want) // 2:len(want) // 2 + 3]
    r = run([ex("stop"), llama, prompt, stop, "zzzzqq"])
    check(r.returncode == 0 and r.stdout == want[:want.index(stop)] + "\n[finish=stop]\n",
          f"stop {stop!r}: {r.stdout!r}")
    r = run([ex("chat"), gemma, "Hello", "8"])
    lines = r.stdout.split("\n")
    check(r.returncode == 0 and lines[0] == "template: gemma", f"chat template: {r.stdout[:80]!r}")
    if "--- prompt\n" in r.stdout and "\n--- reply\n" in r.stdout:
        rendered = r.stdout.split("--- prompt\n", 1)[1].split("\n--- reply\n", 1)[0]
        reply = r.stdout.split("\n--- reply\n", 1)[1].rpartition("\n[finish=")[0]
        check(rendered.startswith("<start_of_turn>user\nYou are a helpful assistant.\n\nHello<end_of_turn>\n"),
              f"chat rendering: {rendered!r}")
        cli_reply = run([cli, "run", "-m", gemma, "--allow-unsigned", "-p", rendered, "-n", "8", "--temp", "0"]).stdout
        check(reply == cli_reply, f"chat reply {reply!r} == edgellm run on the rendering {cli_reply!r}")
    else:
        check(False, f"chat output: {r.stdout!r}")
    r = run([ex("log"), llama])
    check(r.returncode == 0 and f"version: {version} (header {version})" in r.stdout
          and "[app-log info] loaded llama model" in r.stdout and "[app-log info] session: 256 tokens" in r.stdout
          and "[app-log error] loading /nonexistent/model.gguf failed" in r.stdout
          and "missing file: io" in r.stdout, f"log: {r.stdout!r}")

    # ---- verify before load (libedgellm-package) ----
    pkg = os.path.join(tmp, "pkg")
    os.makedirs(pkg)
    m = os.path.join(pkg, "tiny.gguf")
    shutil.copyfile(llama, m)
    key, other = os.path.join(tmp, "release"), os.path.join(tmp, "other")
    ok = run([cli, "keygen", "--out", key]).returncode == 0 and run([cli, "keygen", "--out", other]).returncode == 0
    ok = ok and run([cli, "sign", "--key", key + ".sec", m, "--version", "2", "--smoke-n", "4"]).returncode == 0
    check(ok, "keygen + sign a copy of the tiny model")
    for kind in ["pkg-config", "cmake", "cmake-static", "verify-static"]:
        exe = os.path.join(tmp, "verify-static") if kind == "verify-static" else os.path.join(bins[kind], "verify")
        if not check(os.path.exists(exe), f"{kind}: verify example built"):
            continue
        r = run([exe, m, "--pub", key + ".pub"])
        check(r.returncode == 0 and "ok: package tiny v2, signature verified" in r.stdout
              and "loaded llama model" in r.stdout, f"{kind} verify of a good package: {r.stdout!r}")
    vx = os.path.join(bins["pkg-config"], "verify")
    r = subprocess.run([vx, m, "--pub", other + ".pub"], capture_output=True, text=True)
    check(r.returncode == 14 and r.stdout.startswith("refused: key check failed"), f"wrong key: {r.returncode} {r.stdout!r}")
    cli_r = subprocess.run([cli, "verify", "--pub", other + ".pub", m], capture_output=True, text=True)
    check(cli_r.returncode == r.returncode, f"same exit status as edgellm verify ({cli_r.returncode})")
    store = os.path.join(tmp, "store")
    r = run([cli, "install", m, "--store", store, "--pub", key + ".pub"])
    if check(r.returncode == 0, "edgellm install into a store"):
        r = run([vx, "--store", store])
        check(r.returncode == 0 and "ok: package tiny v2" in r.stdout and "loaded llama model" in r.stdout,
              f"the store's active model: {r.stdout!r}")
        r = run([vx, m, "--store", store])
        check(r.returncode == 0, f"a package checked against the store's key: {r.stdout!r}")
    data = bytearray(open(m, "rb").read())
    data[len(data) // 2] ^= 0x01
    open(m, "wb").write(bytes(data))
    r = subprocess.run([vx, m, "--pub", key + ".pub"], capture_output=True, text=True)
    check(r.returncode == 21 and r.stdout.startswith("refused: hash check failed") and "loaded" not in r.stdout,
          f"a flipped model byte: {r.returncode} {r.stdout!r}")

    # ---- relocation: move the prefix, pkg-config follows ----
    moved = os.path.join(tmp, "moved")
    os.rename(prefix, moved)
    env2 = dict(os.environ, PKG_CONFIG_PATH=os.path.join(moved, os.path.basename(libdir), "pkgconfig"))
    inc = run(["pkg-config", "--cflags", "edgellm"], env=env2).stdout.strip()
    check(inc.startswith("-I" + moved) and os.path.isfile(os.path.join(inc[2:], "edgellm.h")),
          f"relocated pkg-config --cflags: {inc}")
    print(f"test_install: {fails} failures")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
