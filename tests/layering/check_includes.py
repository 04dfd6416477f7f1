#!/usr/bin/env python3
"""Checks that no source file includes a header of a higher layer (ctest `layering`).

    check_includes.py ROOT [--layers FILE]

The layers, lowest first, come from FILE (default ROOT/cmake/layers.txt, the table CMakeLists.txt builds the layer
libraries from): each line `layer : folders under src/ | public headers in include/gaf/`. Every file under
ROOT/src and ROOT/include/gaf belongs to a layer by its folder or its name; each of its #include lines naming a
project header (gaf/..., or a path under src/) must name one of its own layer or a lower one. Prints FILE:LINE for
each upward include and exits 1 when there is one.
"""
import argparse
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]')


def read_table(path):
    layers, dirs, headers = [], {}, {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            m = re.match(r"^([a-z_]+)\s*:([^|]*)\|(.*)$", line)
            if not m:
                sys.exit(f"{path}:{n}: not 'layer : folders | headers'")
            layer = m.group(1)
            layers.append(layer)
            for d in m.group(2).split():
                dirs[d] = layer
            for h in m.group(3).split():
                headers["gaf/" + h] = layer
    return layers, dirs, headers


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--layers")
    args = ap.parse_args()
    root = os.path.abspath(args.root)
    layers, dirs, headers = read_table(args.layers or os.path.join(root, "cmake", "layers.txt"))
    rank = {layer: i for i, layer in enumerate(layers)}
    problems, files = [], 0

    def layer_of_include(name):
        if name.startswith("gaf/"):
            return headers.get(name, "?")
        top = name.split("/", 1)[0]
        if "/" in name and top in dirs:
            return dirs[top]
        return None  # not a project header: the standard library, ONNX, oneDNN, ...

    sources = []
    for base, layer_of in (("src", lambda rel: dirs.get(rel.split("/")[1])),
                           ("include/gaf", lambda rel: headers.get(rel[len("include/"):]))):
        for d, _, names in os.walk(os.path.join(root, base)):
            for name in sorted(names):
                if name.endswith((".cc", ".h")):
                    rel = os.path.relpath(os.path.join(d, name), root)
                    sources.append((rel, layer_of(rel)))
    for rel, layer in sorted(sources):
        if layer is None:
            problems.append(f"{rel}: in no layer; add its folder or header to the layer table")
            continue
        files += 1
        with open(os.path.join(root, rel), errors="replace") as f:
            for n, line in enumerate(f, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = layer_of_include(m.group(1))
                if target is None:
                    continue
                if target == "?":
                    problems.append(f"{rel}:{n}: {m.group(1)} is in no layer; add it to the layer table")
                elif rank[target] > rank[layer]:
                    problems.append(f"{rel}:{n}: {layer} includes {m.group(1)}, of layer {target} above it")
    for p in problems:
        print(p)
    if problems:
        print(f"layers, low to high: {' < '.join(layers)} (cmake/layers.txt)")
    print(f"layering: {files} files, {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
