"""Command line: ``python -m vtl info`` (also installed as the ``vtl`` command)."""

from __future__ import annotations

import argparse
import json
import platform
import sys
from typing import Any


def _backend_report(name: str) -> dict[str, Any]:
    from vtl import backends

    b = backends.get(name)
    report: dict[str, Any] = {"available": b.is_available}
    if not b.is_available:
        report["reason"] = b.unavailable_reason
        if name == "wgpu":
            report.update(_wgpu_adapter())
        return report
    report["devices"] = [str(d) for d in b.devices()]
    report["dtypes"] = {str(d): sorted(b.dtypes(d.index)) for d in b.devices()}
    try:
        report["runtime"] = b.info()
    except Exception as exc:  # a driver query failing must not hide the rest
        report["info_error"] = f"{type(exc).__name__}: {exc}"
    memory_info = getattr(b.xp, "memory_info", None)  # the wgpu library's buffer pool
    if memory_info is not None:
        report["memory"] = memory_info()
    return report


def _wgpu_adapter() -> dict[str, Any]:
    """The adapter the wgpu library would use, even when the backend is not enabled."""
    try:
        import vtl.backends.wgpu as xp

        return {"adapter": xp.runtime_info()}
    except Exception as exc:
        return {"adapter_error": f"{type(exc).__name__}: {exc}"}


def info() -> dict[str, Any]:
    """Versions, backends (with the reason when unavailable), devices and dtypes."""
    import vtl
    from vtl import backends

    return {
        "vtl": vtl.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "array_api_version": vtl.__array_api_version__,
        "default_backend": backends.get_backend(),
        "backends": {name: _backend_report(name) for name in backends.available()},
    }


def _bytes(n: int) -> str:
    """``n`` bytes in B, KiB, MiB or GiB."""
    size, unit = float(n), "B"
    for bigger in ("KiB", "MiB", "GiB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"


def _memory_line(m: dict[str, int]) -> str:
    return (f"  memory: {_bytes(m['in_use'])} in use, {_bytes(m['pooled'])} pooled for reuse, "
            f"peak {_bytes(m['peak'])}; {m['buffers_created']} buffers created, "
            f"{m['reused']} reuses")


def _print_human(data: dict[str, Any]) -> None:
    print(f"vtl {data['vtl']} (array API {data['array_api_version']}), "
          f"Python {data['python']} on {data['platform']}")
    print(f"default backend: {data['default_backend']}")
    for name, rep in data["backends"].items():
        if not rep["available"]:
            print(f"\n[{name}] unavailable: {rep['reason']}")
        else:
            print(f"\n[{name}] available, devices: {', '.join(rep['devices'])}")
        for key, value in rep.items():
            if key in ("available", "reason", "devices"):
                continue
            if key == "memory":
                print(_memory_line(value))
            elif isinstance(value, dict):
                print(f"  {key}:")
                for k, v in value.items():
                    print(f"    {k}: {v}")
            else:
                print(f"  {key}: {value}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="vtl", description="vtl command line")
    sub = parser.add_subparsers(dest="command", required=True)
    p_info = sub.add_parser("info", help="versions, backends, devices and dtypes")
    p_info.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    if args.command == "info":
        data = info()
        if args.json:
            json.dump(data, sys.stdout, indent=2, default=str)
            print()
        else:
            _print_human(data)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
