"""The README's configuration table gives the defaults the code has.

Each row whose default is a plain literal (`` `30` ``, or `` `1`, `0` `` for two
variables) is compared with the default the code passes where it reads that
variable (``env_int("NAME", 30, ...)``, ``os.environ.get("NAME", "...")``).
Rows the code computes (``1`` with ``SECURE_COOKIES``) are not literals on
either side and are left to their own tests.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Where the environment is read: the settings and the commands that take --host / --port.
SOURCES = [ROOT / "config" / "settings.py", *sorted((ROOT / "audits" / "management" / "commands").glob("*.py"))]
READERS = {"env_int", "env_float", "env_bool", "env_str", "env_choice", "get", "getenv"}
ROW = re.compile(r"^\| ((?:`[A-Z0-9_]+`(?:, )?)+) \| ((?:`[^`|]+`(?:, )?)+) \|")


def readme_defaults() -> dict[str, str]:
    text = (ROOT / "README.md").read_text()
    table = text[text.index("## Configuration"):]
    table = table[: table.index("\n## ", 1)]
    found = {}
    for line in table.splitlines():
        row = ROW.match(line)
        if row is None:
            continue
        names = re.findall(r"`([^`]+)`", row.group(1))
        values = re.findall(r"`([^`]+)`", row.group(2))
        if len(names) == len(values):
            found.update(zip(names, values, strict=True))
    return found


def code_defaults() -> dict[str, object]:
    found = {}
    for path in SOURCES:
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Call) or len(node.args) < 2:
                continue
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            key, default = node.args[0], node.args[1]
            if name in READERS and isinstance(key, ast.Constant) and isinstance(default, ast.Constant):
                found.setdefault(key.value, default.value)
    return found


def as_written(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def test_every_literal_default_in_the_readmes_configuration_table_is_the_codes():
    documented, coded = readme_defaults(), code_defaults()
    compared = {name: (value, as_written(coded[name])) for name, value in documented.items() if name in coded}
    # Most of the table is literal: a parse that found only a handful of rows has lost its way.
    assert len(compared) >= 30, sorted(compared)
    assert {name: pair for name, pair in compared.items() if pair[0] != pair[1]} == {}
