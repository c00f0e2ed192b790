"""`python -m impl.coord tree URL [PATH]`: print a coordination tree, for debugging a cluster.

One line per node, parents first: path, version, and data (UTF-8 if it decodes, else hex). The
walk is bounded (MAX_NODES); past it the listing ends with a line saying so.
"""
from __future__ import annotations

import argparse
import sys

from . import CoordError, NoNode, connect

MAX_NODES = 10_000


def tree(url: str, root: str = "/", out=sys.stdout) -> int:
    client = connect(url, session_timeout_ms=5000)
    try:
        stack, shown = [root], 0
        while stack:  # depth-first, children in sorted order; bounded by MAX_NODES
            path = stack.pop()
            try:
                data, version = client.get(path)
                children = client.get_children(path)
            except NoNode:
                continue  # deleted while we walked
            if shown >= MAX_NODES:
                print(f"... stopped after {MAX_NODES} nodes", file=out)
                break
            try:
                text = data.decode("utf-8")
            except UnicodeDecodeError:
                text = "0x" + data.hex()
            print(f"{path}  v{version}  {text}", file=out)
            shown += 1
            prefix = "" if path == "/" else path
            stack.extend(f"{prefix}/{c}" for c in reversed(children))
        return 0
    finally:
        client.close()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m impl.coord", description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("tree", help="print the tree under PATH")
    t.add_argument("url", help="embedded://127.0.0.1:PORT or zk://127.0.0.1:PORT[/chroot]")
    t.add_argument("path", nargs="?", default="/")
    args = p.parse_args(argv)
    try:
        return tree(args.url, args.path)
    except CoordError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
