"""The SSH shell's read commands: ``ls stat cat head tail wc find tree search pwd cd echo help agents``.

Each prints what its GNU namesake prints for the same tree, so scripts written for a normal
machine work; errors go through :class:`~.base.Io` as ``afi: <path>: <code>: <message>``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from afi.errors import AfiError, InvalidPath
from afi.glob import Glob
from afi.model import Entry
from afi.paths import basename, parent

from .base import Io, iter_lines, read_operand
from .fmt import blocks, ls_long, stat_text, wc_line

if TYPE_CHECKING:
    from .shell import Shell

__all__ = ["split_flags"]


def split_flags(args: list[str], takes_value: str = "") -> tuple[dict[str, str], list[str]]:
    """Given arguments, return (flags, operands); letters in ``takes_value`` take the next argument.

    ``-la`` is ``-l -a``; ``--`` ends the flags; ``-`` alone is an operand.
    """
    flags: dict[str, str] = {}
    operands: list[str] = []
    rest = iter(args)
    for arg in rest:
        if arg == "--":
            operands.extend(rest)
            break
        if not arg.startswith("-") or arg == "-" or arg[1:2].isdigit():
            operands.append(arg)
            continue
        letters = arg[1:]
        for index, letter in enumerate(letters):
            if letter in takes_value:
                value = letters[index + 1 :] or next(rest, None)
                if value is None:
                    raise InvalidPath(f"option -{letter} needs a value")
                flags[letter] = value
                break
            flags[letter] = ""
    return flags, operands


def known_flags(flags: dict[str, str], allowed: str, name: str) -> None:
    """Refuse any option letter a command does not take."""
    for letter in flags:
        if letter not in allowed:
            raise InvalidPath(f"{name}: unknown option -{letter}; see 'help'")


def _count(value: str, name: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise InvalidPath(f"{name}: {value!r} is not a number") from None
    if number < 0:
        raise InvalidPath(f"{name}: {value!r} must not be negative")
    return number


# -- listing ------------------------------------------------------------------------------------


def ls(shell: Shell, args: list[str], io: Io) -> Iterator[bytes]:
    flags, operands = split_flags(args)
    known_flags(flags, "laAd1", "ls")
    long, show_all, almost, as_file = "l" in flags, "a" in flags, "A" in flags or "a" in flags, "d" in flags
    files: list[tuple[str, Entry]] = []
    folders: list[tuple[str, Entry]] = []
    for operand in operands or ["."]:
        try:
            entry = shell.client.stat(shell.path(operand))
        except AfiError as err:
            io.fail(err)
            continue
        (folders if entry.type == "directory" and not as_file else files).append((operand, entry))
    sections: list[str] = []
    if files:
        rows = sorted(files, key=lambda r: r[0])
        sections.append(_rows(shell, rows, long))
    many = len(operands) > 1 or bool(files)
    for operand, entry in sorted(folders, key=lambda r: r[0]):
        try:
            children = shell.list_all(entry.path)
        except AfiError as err:
            io.fail(err)
            continue
        rows = [(basename(c.path), c) for c in children if almost or not basename(c.path).startswith(".")]
        if show_all:
            dots = [(".", entry), ("..", shell.client.stat(parent(entry.path)))]
            rows = dots + rows
        body = _rows(shell, rows, long, total=True)
        sections.append(f"{operand}:\n{body}" if many else body)
    yield "\n".join(sections).encode()


def _rows(shell: Shell, rows: list[tuple[str, Entry]], long: bool, *, total: bool = False) -> str:
    if not long:
        return "".join(f"{name}\n" for name, _ in rows)
    head = f"total {sum(blocks(e) for _, e in rows)}\n" if total else ""
    return head + "".join(line + "\n" for line in ls_long(rows, shell.user, shell.group))


def stat(shell: Shell, args: list[str], io: Io) -> Iterator[bytes]:
    flags, operands = split_flags(args)
    known_flags(flags, "j", "stat")
    if not operands:
        raise InvalidPath("stat: give a path, e.g. stat /facts")
    for operand in operands:
        try:
            entry = shell.client.stat(shell.path(operand))
        except AfiError as err:
            io.fail(err)
            continue
        if "j" in flags:
            yield (json.dumps(entry.model_dump(mode="json", by_alias=True, exclude_none=True)) + "\n").encode()
        else:
            yield stat_text(entry, shell.user, shell.group).encode()


# -- reading ------------------------------------------------------------------------------------


def _inputs(shell: Shell, operands: list[str], io: Io) -> Iterator[tuple[str | None, Iterable[bytes]]]:
    """Yield (name, chunks) per operand; ``-`` or no operand is the input stream."""
    for operand in operands or ["-"]:
        if operand == "-":
            yield None, io.stdin
            continue
        try:
            path = shell.path(operand)
            first = read_operand(shell, path)
            head = next(first, b"")
        except AfiError as err:
            io.fail(err)
            continue
        yield operand, _prepend(head, first)


def _prepend(head: bytes, rest: Iterator[bytes]) -> Iterator[bytes]:
    if head:
        yield head
    yield from rest


def cat(shell: Shell, args: list[str], io: Io) -> Iterator[bytes]:
    _, operands = split_flags(args)
    for _, chunks in _inputs(shell, operands, io):
        yield from chunks


def _head_tail_options(args: list[str], name: str) -> tuple[str, int, bool, list[str]]:
    """Return (unit 'n'|'c', count, from_start for tail's +N, operands)."""
    normalised = [f"-n{a[1:]}" if a[:1] == "-" and a[1:].isdigit() else a for a in args]
    flags, operands = split_flags(normalised, takes_value="nc")
    known_flags(flags, "nc", name)
    unit = "c" if "c" in flags else "n"
    raw = flags.get(unit, "10")
    from_start = raw.startswith("+")
    return unit, _count(raw.lstrip("+"), name), from_start, operands


def head(shell: Shell, args: list[str], io: Io) -> Iterator[bytes]:
    unit, count, _, operands = _head_tail_options(args, "head")
    for index, (name, chunks) in enumerate(_inputs(shell, operands, io)):
        if len(operands) > 1:
            yield f"{'' if index == 0 else chr(10)}==> {name or 'standard input'} <==\n".encode()
        yield from _first(chunks, unit, count)


def _first(chunks: Iterable[bytes], unit: str, count: int) -> Iterator[bytes]:
    if count == 0:
        return
    if unit == "c":
        left = count
        for chunk in chunks:
            yield chunk[:left]
            left -= len(chunk[:left])
            if left <= 0:
                return
        return
    for number, line in enumerate(iter_lines(chunks), start=1):
        yield line
        if number >= count:
            return


def tail(shell: Shell, args: list[str], io: Io) -> Iterator[bytes]:
    unit, count, from_start, operands = _head_tail_options(args, "tail")
    for index, (name, chunks) in enumerate(_inputs(shell, operands, io)):
        if len(operands) > 1:
            yield f"{'' if index == 0 else chr(10)}==> {name or 'standard input'} <==\n".encode()
        data = b"".join(chunks)
        if unit == "c":
            yield data[max(count - 1, 0) :] if from_start else (data[-count:] if count else b"")
            continue
        lines = list(iter_lines([data]))
        if from_start:
            yield b"".join(lines[max(count - 1, 0) :])
        else:
            yield b"".join(lines[-count:] if count else [])


def wc(shell: Shell, args: list[str], io: Io) -> Iterator[bytes]:
    flags, operands = split_flags(args)
    known_flags(flags, "lwcm", "wc")
    wanted = [f for f in "lwmc" if f in flags] or ["l", "w", "c"]
    rows: list[tuple[list[int], str | None]] = []
    sizes = 0
    for name, chunks in _inputs(shell, operands, io):
        data = b"".join(chunks)
        sizes += len(data)
        counts = {
            "l": data.count(b"\n"),
            "w": len(data.split()),
            "m": len(data.decode("utf-8", "replace")),
            "c": len(data),
        }
        rows.append(([counts[f] for f in wanted], name))
    if not rows:
        return
    # GNU's widths: one count of one input is bare; the input stream pads to 7; files to the digits of their sizes.
    if len(wanted) == 1 and len(rows) == 1:
        width = 1
    elif "-" in operands or not operands:
        width = 7
    else:
        width = len(str(sizes))
    if len(rows) > 1:
        rows.append(([sum(r[0][i] for r in rows) for i in range(len(wanted))], "total"))
    for counts_row, name in rows:
        yield wc_line(counts_row, width, name if name is not None else ("-" if operands else None)).encode()


# -- walking ------------------------------------------------------------------------------------


def _walk(shell: Shell, entry: Entry, depth: int, max_depth: int | None, io: Io) -> Iterator[tuple[Entry, int]]:
    yield entry, depth
    if entry.type != "directory" or (max_depth is not None and depth >= max_depth):
        return
    try:
        children = shell.list_all(entry.path)
    except AfiError as err:  # report the folder and keep walking, as GNU find does
        io.fail(err)
        return
    for child in children:
        yield from _walk(shell, child, depth + 1, max_depth, io)


def find(shell: Shell, args: list[str], io: Io) -> Iterator[bytes]:
    operands: list[str] = []
    name_glob: str | None = None
    kind: str | None = None
    max_depth: int | None = None
    rest = iter(args)
    for arg in rest:
        if arg in ("-name", "-type", "-maxdepth"):
            value = next(rest, None)
            if value is None:
                raise InvalidPath(f"find: {arg} needs a value")
            if arg == "-name":
                name_glob = value
            elif arg == "-type":
                if value not in ("f", "d", "l"):
                    raise InvalidPath("find: -type takes f, d or l")
                kind = {"f": "file", "d": "directory", "l": "symlink"}[value]
            else:
                max_depth = _count(value, "find -maxdepth")
        elif arg.startswith("-"):
            raise InvalidPath(f"find: unknown predicate {arg}; this find offers -name, -type and -maxdepth")
        else:
            operands.append(arg)
    name_test = None if name_glob is None else Glob(name_glob).matches
    for operand in operands or ["."]:
        try:
            top = shell.client.stat(shell.path(operand))
            walked = list(_walk(shell, top, 0, max_depth, io))
        except AfiError as err:
            io.fail(err)
            continue
        base = top.path
        for entry, _ in walked:
            rel = entry.path[len(base) :].lstrip("/") if base != "/" else entry.path.lstrip("/")
            shown = operand if not rel else (operand.rstrip("/") + "/" + rel if operand != "/" else "/" + rel)
            if name_test is not None and not name_test(basename(entry.path) or "/"):
                continue
            if kind is not None and entry.type != kind:
                continue
            yield (shown + "\n").encode()


def tree(shell: Shell, args: list[str], io: Io) -> Iterator[bytes]:
    flags, operands = split_flags(args, takes_value="L")
    known_flags(flags, "L", "tree")
    max_depth = _count(flags["L"], "tree -L") if "L" in flags else None
    operand = operands[0] if operands else "."
    top = shell.client.stat(shell.path(operand))
    counts = {"directory": 0, "file": 0}
    lines = [operand]
    _draw(shell, top, "", 1, max_depth, lines, counts, io)
    dirs, files = counts["directory"], counts["file"]
    lines.append("")
    lines.append(f"{dirs} director{'y' if dirs == 1 else 'ies'}, {files} file{'' if files == 1 else 's'}")
    yield ("\n".join(lines) + "\n").encode()


def _draw(
    shell: Shell,
    entry: Entry,
    prefix: str,
    depth: int,
    max_depth: int | None,
    lines: list[str],
    counts: dict[str, int],
    io: Io,
) -> None:
    if entry.type != "directory" or (max_depth is not None and depth > max_depth):
        return
    try:
        children = [c for c in shell.list_all(entry.path) if not basename(c.path).startswith(".")]
    except AfiError as err:
        io.fail(err)
        return
    for index, child in enumerate(children):
        last = index == len(children) - 1
        lines.append(f"{prefix}{'└── ' if last else '├── '}{basename(child.path)}")
        counts["directory" if child.type == "directory" else "file"] += 1
        _draw(shell, child, prefix + ("    " if last else "│   "), depth + 1, max_depth, lines, counts, io)


# -- the rest -----------------------------------------------------------------------------------


def search(shell: Shell, args: list[str], io: Io) -> Iterator[bytes]:
    flags, operands = split_flags(args, takes_value="npt")
    known_flags(flags, "nptx", "search")
    question = " ".join(operands).strip()
    if not question:
        raise InvalidPath('search: ask a question, e.g. search "what does Alice drink"')
    query: dict[str, Any] = {"semantic": question}
    if "t" in flags:
        try:
            query["threshold"] = float(flags["t"])
        except ValueError:
            raise InvalidPath(f"search: -t takes a number between 0 and 1, not {flags['t']!r}") from None
    limit = _count(flags.get("n", "10"), "search -n") or 10
    page = shell.client.search(query, path=shell.path(flags.get("p", "/")), limit=limit)
    for match in page.matches:
        yield f"{match.score or 0.0:.3f}\t{match.path}\t{match.text}\n".encode()
        if "x" in flags and match.x_explain:
            yield f"\t{json.dumps(match.x_explain, sort_keys=True)}\n".encode()
    if not page.matches:
        io.status = 1


def pwd(shell: Shell, args: list[str], io: Io) -> Iterator[bytes]:
    yield (shell.cwd + "\n").encode()


def cd(shell: Shell, args: list[str], io: Io) -> Iterator[bytes]:
    target = shell.path(args[0]) if args else "/"
    entry = shell.client.stat(target)
    if entry.type != "directory":
        raise InvalidPath("not a folder", path=target)
    shell.cwd = target
    yield b""


def echo(shell: Shell, args: list[str], io: Io) -> Iterator[bytes]:
    newline = True
    if args[:1] == ["-n"]:
        newline, args = False, args[1:]
    # A byte that is not UTF-8 arrives as a surrogate escape (the session decodes with surrogateescape): give it back.
    yield (" ".join(args) + ("\n" if newline else "")).encode("utf-8", "surrogateescape")


def help_(shell: Shell, args: list[str], io: Io) -> Iterator[bytes]:
    width = max(len(spec.usage) for spec in shell.commands.values())
    lines = ["afi shell: the memory tree over SSH (no real shell; pipes '|', '>', '>>' and ';' work).", ""]
    for _, spec in sorted(shell.commands.items()):
        lines.append(f"  {spec.usage:<{width}}  {spec.summary}")
    lines += ["", "Errors print as 'afi: <path>: <code>: <message>' and exit 2; grep exits 1 when nothing matched."]
    yield ("\n".join(lines) + "\n").encode()


def agents(shell: Shell, args: list[str], io: Io) -> Iterator[bytes]:
    yield shell.agents_text.encode()
