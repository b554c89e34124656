"""C/C++ message extraction: string literals, macro calls and printf/fmt/stream formats.

Used by extract.py; no dependencies beyond the standard library."""
import re

STR = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def strip_comments(src):
    """Removes // and /* */ comments, keeping string literals and line numbers."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append(src[i : j + 1])
            i = j + 1
        elif c == "'":
            j = i + 1
            while j < n and src[j] != "'":
                j += 2 if src[j] == "\\" else 1
            out.append(src[i : j + 1])
            i = j + 1
        elif src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * src[i:j].count("\n"))
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def call_args(src, open_paren):
    """The top-level arguments of the call whose '(' is at open_paren, and the end index."""
    depth, i, start, args, n = 0, open_paren, open_paren + 1, [], len(src)
    while i < n:
        c = src[i]
        if c == '"' or c == "'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            i = j + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                args.append(src[start:i].strip())
                return args, i
        elif c == "," and depth == 1:
            args.append(src[start:i].strip())
            start = i + 1
        i += 1
    return None, n


def unescape(s):
    return (
        s.replace("\\n", " ")
        .replace("\\t", " ")
        .replace('\\"', '"')
        .replace("\\'", "'")
        .replace("\\\\", "\\")
    )


def printf_format(arg, params=()):
    """The format of a printf-style first argument: adjacent literals joined, a macro
    parameter or other identifier between them standing for %s, PRIu64-style macros for %lu.
    None when the argument holds no literal."""
    parts, pos, any_lit = [], 0, False
    for m in STR.finditer(arg):
        between = arg[pos : m.start()].strip()
        if between:
            if re.fullmatch(r"PRI[diuxX]\d+|PRI[diuxX]PTR", between):
                parts.append("lu")
            else:
                parts.append("%s")
        parts.append(unescape(m.group(1)))
        any_lit = True
        pos = m.end()
    tail = arg[pos:].strip()
    if tail and any_lit:
        parts.append("%s")
    return "".join(parts) if any_lit else None


def stream_format(args):
    """MakeString/c10::str style: literal arguments kept, the others stand for %s."""
    out, any_lit = [], False
    for a in args:
        lits = STR.findall(a)
        if lits and STR.sub("", a).strip() in ("", "+"):
            out.append("".join(unescape(x) for x in lits))
            any_lit = True
        else:
            out.append("%s")
    return "".join(out) if any_lit else None


def fmt_to_printf(s):
    """fmt's {} and {:x} placeholders as %s."""
    return re.sub(r"\{[^{}]*\}", "%s", s)


def line_of(src, i):
    return src.count("\n", 0, i) + 1


def calls(src, names):
    """(name, args, line) for every call of one of `names` in src."""
    pat = re.compile(r"\b(" + "|".join(map(re.escape, names)) + r")\s*\(")
    for m in pat.finditer(src):
        args, _ = call_args(src, m.end() - 1)
        if args is not None:
            yield m.group(1), args, line_of(src, m.start())


def warn_macros(src, warn="WARN"):
    """Macros whose body WARNs with a format naming one of their parameters:
    {macro: (param_index, body_format_with_%PARAM%)}."""
    found = {}
    for m in re.finditer(r"#\s*define\s+(\w+)\(([^)]*)\)((?:[^\n]*\\\n)*[^\n]*)", src):
        name, params, body = m.group(1), [p.strip() for p in m.group(2).split(",")], m.group(3)
        w = re.search(r"\b" + warn + r"\s*\(", body)
        if not w or name == warn:
            continue
        args, _ = call_args(body, w.end() - 1)
        if not args:
            continue
        first = args[0]
        for idx, p in enumerate(params):
            if p and re.search(r'"\s*' + re.escape(p) + r'\s*"', first):
                fmt = first.replace(p, '"%PARAM%"')
                fmt = printf_format(fmt)
                if fmt:
                    found[name] = (idx, fmt)
    return found
