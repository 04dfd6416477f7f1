#!/usr/bin/env python3
"""Runs the bad-input catalogue (cases.txt) against the graph-autofusion CLI.

Each case runs one command and asserts:
  - its exit status (`exit`), never a signal;
  - its output says what `says` (a regular expression) and, when the command fails, says it in exactly one line
    starting with "error:" (none when the exit status is a `verdict`, as verify's), with no crash, abort or
    sanitizer report;
  - no file is left behind and none is changed: the case's scratch folder holds afterwards exactly what its
    setup put there plus what `leaves` names, the bad inputs and test models are byte for byte as before, and
    the kernel cache holds no temporary;
  - every `after` command exits 0 (e.g. a damaged cache entry was rebuilt).

  run_cases.py --bin GAF --make MAKE_BAD_INPUTS --models MODELS --cases cases.txt [--only NAME]
"""
import argparse
import fnmatch
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile

CRASH = re.compile(r"terminate called|what\(\):|Aborted|Segmentation fault|AddressSanitizer|runtime error:|"
                   r"LeakSanitizer|core dumped|\[json\.exception")
KEYS = {"why", "setup", "run", "exit", "says", "leaves", "after", "env", "verdict"}


def parse_cases(path):
    cases, case = [], None
    with open(path, encoding="utf-8") as f:
        for number, raw in enumerate(f, 1):
            line = raw.rstrip("\n")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            where = f"{path}:{number}"
            m = re.fullmatch(r"\[([a-z0-9][a-z0-9-]*)\]", line.strip())
            if m:
                case = {"name": m.group(1), "where": where, "setup": [], "after": [], "leaves": [], "env": []}
                cases.append(case)
                continue
            key, _, value = line.strip().partition(" ")
            if case is None or key not in KEYS:
                sys.exit(f"{where}: expected [case-name] or one of {sorted(KEYS)}, got '{line.strip()}'")
            value = value.strip()
            if key in ("setup", "after", "leaves", "env"):
                case[key].append(value)
            elif key in case:
                sys.exit(f"{where}: case '{case['name']}' gives '{key}' twice")
            else:
                case[key] = value
    names = set()
    for c in cases:
        for key in ("why", "run", "exit", "says"):
            if key not in c:
                sys.exit(f"{c['where']}: case '{c['name']}' has no '{key}'")
        if c["name"] in names:
            sys.exit(f"{c['where']}: case '{c['name']}' is given twice")
        names.add(c["name"])
        c["exit"] = int(c["exit"])
    return cases


def snapshot(root):
    """path relative to root -> sha256 of its bytes (a symlink: its target)."""
    out = {}
    if not os.path.isdir(root):
        return out
    for folder, dirs, files in os.walk(root):
        for name in files + [d for d in dirs if os.path.islink(os.path.join(folder, d))]:
            full = os.path.join(folder, name)
            rel = os.path.relpath(full, root)
            if os.path.islink(full):
                out[rel] = "link:" + os.readlink(full)
            else:
                with open(full, "rb") as f:
                    out[rel] = hashlib.sha256(f.read()).hexdigest()
    return out


def differences(before, after, allowed=()):
    def free(rel):
        return any(fnmatch.fnmatch(rel, pattern) for pattern in allowed)

    new = sorted(p for p in after if p not in before and not free(p))
    gone = sorted(p for p in before if p not in after and not free(p))
    changed = sorted(p for p in before if p in after and before[p] != after[p] and not free(p))
    return [f"left behind: {p}" for p in new] + [f"removed: {p}" for p in gone] + [f"changed: {p}" for p in changed]


def run_case(case, env, root, protected):
    work = os.path.join(root, "work", case["name"])
    os.makedirs(work)
    env = dict(env, WORK=work)
    for assignment in case["env"]:
        key, _, value = assignment.partition("=")
        env[key] = value.replace("$WORK", work)
    problems = []

    def shell(command, what):
        p = subprocess.run(["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            problems.append(f"{what} `{command}` exited {p.returncode}: {(p.stdout + p.stderr).strip()[-400:]}")
        return p

    for command in case["setup"]:
        shell(command, "setup")
    if problems:
        return problems
    before = snapshot(work)
    p = subprocess.run(["bash", "-c", '"$BIN" ' + case["run"]], cwd=work, env=env, capture_output=True, text=True,
                       timeout=600)
    output = p.stdout + p.stderr
    if p.returncode != case["exit"]:
        problems.append(f"exit status {p.returncode}, expected {case['exit']}")
    if not re.search(case["says"], output, re.MULTILINE):
        problems.append(f"the output does not say /{case['says']}/")
    if CRASH.search(output):
        problems.append("the output shows a crash or an uncaught exception")
    errors = [line for line in output.splitlines() if line.startswith("error:")]
    wanted = 1 if case["exit"] != 0 and "verdict" not in case else 0
    if len(errors) != wanted:
        problems.append(f"{len(errors)} lines start with 'error:', expected {wanted}")
    after = snapshot(work)
    problems += differences(before, after, case["leaves"])
    for name, (folder, state) in protected.items():
        problems += [f"{name}: {d}" for d in differences(state, snapshot(folder))]
    for folder, _, files in os.walk(env["XDG_CACHE_HOME"]):
        problems += [f"temporary left in the kernel cache: {f}" for f in files if ".tmp" in f]
    for command in case["after"]:
        shell(command, "after")
    if problems:
        problems.append("output:\n    " + "\n    ".join(output.strip().splitlines()[-12:]))
    return problems


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--make", required=True, help="gaf_make_bad_inputs")
    ap.add_argument("--models", required=True, help="the models gaf_make_test_models wrote")
    ap.add_argument("--cases", required=True)
    ap.add_argument("--only", help="run only this case")
    args = ap.parse_args()
    cases = parse_cases(args.cases)
    if args.only:
        cases = [c for c in cases if c["name"] == args.only]
    root = tempfile.mkdtemp(prefix="gaf_bad_inputs_")
    try:
        bad = os.path.join(root, "bad")
        subprocess.run([args.make, bad], check=True)
        env = dict(os.environ, BIN=os.path.abspath(args.bin), BAD=bad, MODELS=os.path.abspath(args.models),
                   XDG_CACHE_HOME=os.path.join(root, "cache"), GAF_FUSION_CONFIG="", ASCEND_FUSION_CONFIG="")
        protected = {"bad inputs": (bad, snapshot(bad)), "test models": (args.models, snapshot(args.models))}
        failed = 0
        for case in cases:
            problems = run_case(case, env, root, protected)
            if problems:
                failed += 1
                print(f"FAIL {case['name']} ({case['where']}): {case['why']}")
                for problem in problems:
                    print("  " + problem)
        print(f"bad inputs: {len(cases) - failed} of {len(cases)} cases pass")
        return 1 if failed else 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
