#!/usr/bin/env python3
# SPDX-License-Identifier: BSD-3-Clause
"""What a page dumped by chromium --dump-dom shows, for ui.sh: one line per
element with an id, "ID<TAB>CLASSES<TAB>TEXT", and "body<TAB>ATTR=VALUE..."
first. Text is the element's own and its children's, spaces collapsed.

Usage: ui_dom.py FILE
"""
import html.parser
import sys


class Dom(html.parser.HTMLParser):
    VOID = {'meta', 'link', 'input', 'br', 'img', 'hr', 'rect', 'line'}

    def __init__(self):
        super().__init__()
        self.body = {}
        self.stack = []          # [tag, id or None]
        self.elems = {}          # id -> [classes, text parts]
        self.order = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == 'body':
            self.body = a
        if 'id' in a:
            self.elems[a['id']] = [' '.join(a.get('class', '').split()), []]
            self.order.append(a['id'])
        if tag not in self.VOID:
            self.stack.append((tag, a.get('id')))

    def handle_startendtag(self, tag, attrs):
        a = dict(attrs)
        if 'id' in a:
            self.elems[a['id']] = [' '.join(a.get('class', '').split()), []]
            self.order.append(a['id'])

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, -1, -1):
            if self.stack[i][0] == tag:
                del self.stack[i:]
                break

    def handle_data(self, data):
        for _, ident in self.stack:
            if ident:
                self.elems[ident][1].append(data)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = Dom()
    with open(sys.argv[1], encoding='utf-8') as f:
        d.feed(f.read())
    print('body\t' + ' '.join('%s=%s' % kv for kv in sorted(d.body.items())))
    for ident in d.order:
        cls, text = d.elems[ident]
        print('%s\t%s\t%s' % (ident, cls, ' '.join(' '.join(text).split())))


if __name__ == '__main__':
    main()
