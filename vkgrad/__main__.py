"""`python -m vkgrad` (also the `vkgrad` command: .venv/bin/vkgrad, or `vkgrad` once the venv is
activated with `. .venv/bin/activate`).

  vkgrad devices          list the Vulkan devices and which one vkgrad uses by default
  vkgrad dump FILE.py:FN  print a function's program at a compiler stage (see `vkgrad dump -h`)
  vkgrad check FILE.py:FN run its Vulkan kernels one by one against the interpreter and print
                          the per-kernel agreement table (see `vkgrad check -h`)
"""

from __future__ import annotations

import sys

from vkgrad.dump import main as dump_main
from vkgrad.execution.check import main as check_main
from vkgrad.errors import VkgradError
from vkgrad.runtime import default_device_index, list_devices


def devices(argv) -> int:
    default = default_device_index()
    for d in list_devices():
        mark = "*" if d.index == default else " "
        print(f"{mark} {d.index}: {d.name} ({d.type}, Vulkan {'.'.join(map(str, d.api_version))})")
    print("* = default (set VKGRAD_DEVICE=<index> to choose another)")
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    commands = {"devices": devices, "dump": dump_main, "check": check_main}
    if argv and argv[0] in ("-h", "--help", "help"):
        print(__doc__.strip())
        return 0
    if not argv or argv[0] not in commands:
        what = (f"unknown command {argv[0]!r}" if argv else "no command given")
        print(f"vkgrad: {what}; choose one of these (`vkgrad COMMAND --help` says more):\n\n"
              + __doc__.strip(), file=sys.stderr)
        return 2
    try:
        return commands[argv[0]](argv[1:])
    except VkgradError as e:
        print(f"vkgrad: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
