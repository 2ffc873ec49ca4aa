"""The SSH shell's commands, by name: the one table :class:`~.shell.Shell` dispatches on and ``help`` lists.

Read commands are in :mod:`.cmds` and :mod:`.grep`, the ones that change the tree in :mod:`.write`.
"""

from __future__ import annotations

from . import cmds, grep, write
from .base import CommandSpec

__all__ = ["COMMANDS"]

COMMANDS: dict[str, CommandSpec] = {
    "ls": CommandSpec(cmds.ls, "ls [-l] [-a] [-A] [-d] [-1] [PATH...]", "list folders (ls -la shows GNU's columns)"),
    "stat": CommandSpec(
        cmds.stat, "stat [-j] PATH...", "an entry's size, times, type and attributes (-j: the AFI Entry as JSON)"
    ),
    "cat": CommandSpec(
        cmds.cat, "cat [FILE...]", "print files (no FILE, or '-': the input); 'cat > FILE' writes the input"
    ),
    "head": CommandSpec(
        cmds.head, "head [-n N | -c N] [FILE...]", "the first N lines (or bytes) of files or of the input"
    ),
    "tail": CommandSpec(
        cmds.tail, "tail [-n N | -n +N | -c N] [FILE...]", "the last N lines (or bytes), or from line N on"
    ),
    "wc": CommandSpec(
        cmds.wc, "wc [-l] [-w] [-c] [-m] [FILE...]", "count lines, words and bytes, as GNU wc prints them"
    ),
    "find": CommandSpec(
        cmds.find, "find [PATH...] [-name GLOB] [-type f|d] [-maxdepth N]", "walk the tree, printing matching paths"
    ),
    "tree": CommandSpec(cmds.tree, "tree [-L N] [PATH]", "draw a folder and everything below it"),
    "search": CommandSpec(
        cmds.search, "search [-n N] [-p PATH] [-t MIN] [-x] QUESTION...", "semantic search: notes ranked by score"
    ),
    "pwd": CommandSpec(cmds.pwd, "pwd", "print the current folder"),
    "cd": CommandSpec(cmds.cd, "cd [PATH]", "change the current folder (interactive shell)"),
    "echo": CommandSpec(cmds.echo, "echo [-n] TEXT...", "print text ('echo text > FILE' writes it, '>>' appends)"),
    "help": CommandSpec(cmds.help_, "help", "this list"),
    "agents": CommandSpec(cmds.agents, "agents", "an AGENTS.md snippet telling an agent how to use this server"),
    "grep": CommandSpec(
        grep.grep, "grep [-r] [-E|-F] [-i] [-n] [-l] [-c] [-w] [-H|-h] [-q] PATTERN [PATH...]", "search lines"
    ),
    "mkdir": CommandSpec(write.mkdir, "mkdir [-p] PATH...", "make folders under /files", writes=True),
    "rm": CommandSpec(
        write.rm, "rm [-r] [-f] PATH...", "delete files and folders; deleting a note forgets it", writes=True
    ),
    "rmdir": CommandSpec(write.rmdir, "rmdir PATH...", "delete empty folders", writes=True),
    "mv": CommandSpec(write.mv, "mv [-f] SOURCE... TARGET", "move or rename (within one area)", writes=True),
    "cp": CommandSpec(
        write.cp, "cp SOURCE... TARGET", "copy files (a note copied to a note path is remembered anew)", writes=True
    ),
    "touch": CommandSpec(write.touch, "touch FILE...", "create empty files that do not exist yet", writes=True),
    "tee": CommandSpec(write.tee, "tee [-a] FILE", "write the input to FILE and print it", writes=True),
}
