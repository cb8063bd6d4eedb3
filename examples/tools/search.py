#!/usr/bin/env python3
"""An offline stand-in for a web search tool, as `charter run --tool web_search=...` runs it.

charter writes the call's arguments to stdin as one JSON object (closed_loop's `Query`:
`{"text": ..., "max_results": ...}`) and reads one JSON value from stdout (its `Hits`:
`{"urls": [...], "snippets": [...]}`). A non-zero exit, or output that is not the
contract, is a failed tool call the model is told of. This one searches nothing: it
answers with where a real search would go, so that a run can be tried without a search
engine. Replace it with a script that calls yours.
"""

import json
import sys
import urllib.parse


def main() -> int:
    try:
        query = json.load(sys.stdin)
        text = str(query["text"])
    except (ValueError, KeyError, TypeError) as error:
        print(f"search.py: expected {{\"text\": ...}} on stdin: {error}", file=sys.stderr)
        return 2
    count = max(1, min(int(query.get("max_results", 5)), 10))
    url = "https://duckduckgo.com/?q=" + urllib.parse.quote(text)
    hits = {
        "urls": [url][:count],
        "snippets": [f"(offline example: no search was made for {text!r})"][:count],
    }
    json.dump(hits, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
