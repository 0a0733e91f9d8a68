#!/usr/bin/env python3
"""Doxygen input filter for include/tg/*.h: the headers document every declaration with a plain
C comment above it (or after it, for fields and enumerators); this makes those comments count
for Doxygen without changing the headers. Line numbers are kept (nothing is inserted or removed
as a line):
  - the file's first comment gets @file;
  - a comment directly above a declaration, struct, enum or #define (no blank line between)
    opens with /** instead of /*; when it stands above several declarations, they become one
    member group sharing it (/** @{ */ ... /** @} */, DISTRIBUTE_GROUP_DOC);
  - a comment after code on the same line (a field, an enumerator) opens with /**<.
Comments followed by a blank line (section rules such as /* ---- batches ---- */) stay plain.
    doxy_filter.py FILE   (prints the filtered file)"""
import re
import sys


def statements(lines, i):
    """Ends (line indices) of the declarations starting at line i, until a blank line, a comment
    or the end of a block."""
    ends, depth, n = [], 0, len(lines)
    while i < n:
        s = lines[i].strip()
        if depth == 0 and (not s or s.startswith('/*') or s.startswith('//') or s.startswith('}')):
            break
        if depth == 0 and s.startswith('#'):
            while lines[i].rstrip().endswith('\\') and i + 1 < n:
                i += 1
            ends.append(i)
            i += 1
            continue
        code = re.sub(r'/\*.*?\*/', '', re.sub(r'"(\\.|[^"\\])*"', '""', lines[i]))
        depth += code.count('{') + code.count('(') - code.count('}') - code.count(')')
        if depth <= 0 and code.rstrip().endswith(';'):
            ends.append(i)
            depth = 0
        i += 1
    return ends


def main(path):
    lines = open(path, encoding='utf-8').read().split('\n')
    first = True
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r'^(\s*)/\*(?![*!])', line)
        if m:
            j = i  # the comment's last line
            while '*/' not in lines[j][m.end() if j == i else 0:] and j + 1 < len(lines):
                j += 1
            if first:
                lines[i] = m.group(1) + '/**' + line[m.end():]
                k = lines[j].rindex('*/')
                lines[j] = lines[j][:k] + '@file ' + lines[j][k:]  # @file with no name: this file
                first = False
            elif j + 1 < len(lines) and lines[j + 1].strip() and not lines[j + 1].lstrip().startswith('/*'):
                ends = statements(lines, j + 1)
                if ends:
                    lines[i] = m.group(1) + '/**' + line[m.end():]
                    if len(ends) > 1:
                        lines[i] = m.group(1) + '/** @{ */ ' + lines[i][len(m.group(1)):]
                        lines[ends[-1]] += ' /** @} */'
            i = j + 1
            continue
        # a comment after code on the same line
        t = re.match(r'^(\s*[^\s/#].*?)/\*(?![*!<])', line)
        if t and '"' not in t.group(1):
            lines[i] = t.group(1) + '/**<' + line[t.end():]
        i += 1
    sys.stdout.write('\n'.join(lines))


if __name__ == '__main__':
    main(sys.argv[1])
