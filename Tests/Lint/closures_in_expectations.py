#!/usr/bin/env python3
"""Refuses closure literals inside the arguments of `#expect(...)` and `#require(...)`.

Swift 6.3.1 can give a closure written inside one of these macros' arguments the same
symbol as another closure of the same type in the enclosing closure (a test's
`withDeployment { ... }` body, for instance): one body then runs for both, silently.
It was seen in a test whose `filter { $0.hasPrefix(...) }` over six metric lines
answered none, because it ran the `allSatisfy { ... }` closure of an `#expect` above it.
So a test computes such a value first (`let holds = lines.contains { ... }`) and
passes the value to the macro. The trailing closure of `#expect(throws:) { ... }` is
outside the parentheses and is not affected.

Usage: closures_in_expectations.py DIRECTORY...; exits 1 and lists every site found.
"""
import pathlib
import re
import sys


def code_mask(source):
    """A byte per character: 1 where the character is code, 0 in comments and string text
    (an interpolation's contents are code)."""
    mask = bytearray(len(source))
    end = len(source)

    def string(index, hashes):
        multiline = source.startswith('"""', index)
        quote = '"""' if multiline else '"'
        index += len(quote)
        close = quote + "#" * hashes
        interpolation = "\\" + "#" * hashes + "("
        while index < end:
            if source.startswith(close, index):
                return index + len(close)
            if source.startswith(interpolation, index):
                index = code(index + len(interpolation), inside_parenthesis=True)
                continue
            index += 2 if source[index] == "\\" and hashes == 0 else 1
        return index

    def comment(index):
        """The end of the block comment at `index`; Swift's nest."""
        depth = 0
        while index < end:
            if source.startswith("/*", index):
                depth, index = depth + 1, index + 2
            elif source.startswith("*/", index):
                depth, index = depth - 1, index + 2
                if depth == 0:
                    return index
            else:
                index += 1
        return index

    def code(index, inside_parenthesis=False):
        depth = 0
        while index < end:
            if source.startswith("//", index):
                newline = source.find("\n", index)
                index = end if newline < 0 else newline
                continue
            if source.startswith("/*", index):
                index = comment(index)
                continue
            # An extended regex literal, `#/…/#`: text, like a string's (`"` and `{` inside it
            # are pattern characters).
            regex = re.match(r"(#+)/", source[index : index + 16])
            if regex:
                close = source.find("/" + regex.group(1), index + len(regex.group(0)))
                index = end if close < 0 else close + 1 + len(regex.group(1))
                continue
            opening = re.match(r'(#*)"', source[index : index + 16])
            if opening:
                index = string(index + len(opening.group(1)), len(opening.group(1)))
                continue
            character = source[index]
            if inside_parenthesis and character == "(":
                depth += 1
            elif inside_parenthesis and character == ")":
                if depth == 0:
                    return index + 1
                depth -= 1
            mask[index] = 1
            index += 1
        return index

    code(0)
    return mask


def sites(source):
    """(line, text) of each `#expect(`/`#require(` whose arguments hold a closure literal."""
    mask = code_mask(source)
    found = []
    for match in re.finditer(r"#(expect|require)\(", source):
        if not mask[match.start()]:
            continue
        depth, index = 1, match.end()
        while index < len(source) and depth:
            if mask[index]:
                depth += {"(": 1, ")": -1}.get(source[index], 0)
            index += 1
        if any(mask[i] and source[i] == "{" for i in range(match.end(), index - 1)):
            line = source.count("\n", 0, match.start()) + 1
            found.append((line, " ".join(source[match.start() : index].split())[:120]))
    return found


def self_check():
    """The rule finds what it must and nothing else (a check that cannot fail proves nothing)."""
    flagged = [
        "#expect(lines.contains { $0.isEmpty })",
        "let x = try #require(xs.first { $0 > 1 })",
        '#expect(a == b, "\\(xs.map { $0 })")',
        '#expect(a, #"\\#(xs.map { $0 })"#)',
        # After a regex literal holding quotes, code is still code.
        'let r = #/"a":"([^"]+)"/#\n#expect(xs.contains { $0 == 1 })',
    ]
    clean = [
        "#expect(throws: E.self) { try f() }",
        '#expect(body == #"{"a": 1}"#)',
        '#expect(text.contains("{"), "}")',
        "// #expect(xs.contains { $0 })",
        '#expect(json == """\n{ "a": "\\(value)" }\n""")',
        "let holds = xs.contains { $0 }\n#expect(holds)",
        "#expect(text.wholeMatch(of: #/\\d{3}/#) != nil)",
        "/* outer /* inner */ #expect(xs.contains { $0 }) */",
    ]
    # Not `assert`: `python3 -O` would drop it.
    wrong = [f"not flagged: {sample}" for sample in flagged if not sites(sample)]
    wrong += [f"flagged: {sample}" for sample in clean if sites(sample)]
    if wrong:
        sys.exit("closures_in_expectations.py is broken:\n" + "\n".join(wrong))


def main(directories):
    self_check()
    count = 0
    for directory in directories:
        for path in sorted(pathlib.Path(directory).rglob("*.swift")):
            for line, text in sites(path.read_text(encoding="utf-8")):
                count += 1
                print(f"{path}:{line}: a closure inside the macro's arguments: {text}")
    if count:
        print(f"{count} closures inside #expect/#require arguments: compute the value first (see this script's header)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:] or ["Tests"]))
