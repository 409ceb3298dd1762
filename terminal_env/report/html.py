"""HTML building blocks: escaping, number formats, the page skeleton and its stylesheet.

Everything shown comes from files a model or a verifier wrote, so every value goes through
:func:`esc` (text and attributes) or :func:`json_script` (data for scripts); nothing is ever
interpolated raw. Pages are self-contained: the stylesheet is inlined, nothing is fetched.
"""

from __future__ import annotations

import html
import json
import math
import time
from typing import Any
from urllib.parse import quote

#: Outcome -> CSS class of its colour.
OUTCOME_CLASSES = {
    "passed": "o-pass",
    "partial": "o-partial",
    "failed": "o-fail",
    "timeout": "o-timeout",
    "tampered": "o-tampered",
    "infra_error": "o-masked",
}


def esc(value: Any) -> str:
    """Text safe in element content and in quoted attributes; None is empty.

    >>> esc('<script>alert("x")</script>')
    '&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;'
    >>> esc(None)
    ''
    """
    if value is None:
        return ""
    return html.escape(str(value), quote=True)


def href(path: str) -> str:
    """A relative link, percent-encoded, safe in a quoted attribute.

    >>> href("trials/a b/1.html")
    'trials/a%20b/1.html'
    """
    return esc(quote(path, safe="/#.-_~"))


def json_script(data: Any, *, cls: str = "data") -> str:
    """Data for a script: a ``<script type="application/json">`` block that can never end early
    (``<``, ``>`` and ``&`` are written as JSON escapes, so ``</script>`` cannot appear).

    >>> json_script({"t": "</script>"})
    '<script type="application/json" class="data">{"t":"\\\\u003c/script\\\\u003e"}</script>'
    """
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    text = text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return f'<script type="application/json" class="{esc(cls)}">{text}</script>'


def cap(text: str, limit: int) -> str:
    """Keep the start of a huge text, saying how much was cut."""
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n... [{len(text) - limit} more characters not shown]"


# ---------------------------------------------------------------------------- formats
def pct(value: float | None, digits: int = 1) -> str:
    """A share as a percentage; None (not measured) as an em dash.

    >>> pct(0.5), pct(None), pct(1/3, 0)
    ('50.0%', '—', '33%')
    """
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{100 * value:.{digits}f}%"


def signed_pct(value: float | None, digits: int = 1) -> str:
    """A difference of shares in percentage points.

    >>> signed_pct(0.25), signed_pct(-0.1), signed_pct(0.0)
    ('+25.0 pp', '−10.0 pp', '±0.0 pp')
    """
    if value is None:
        return "—"
    text = f"{abs(100 * value):.{digits}f} pp"
    if round(100 * value, digits) == 0:
        return "±" + text
    return ("+" if value > 0 else "−") + text


def ci_text(low: float | None, high: float | None, *, signed: bool = False) -> str:
    """The interval ``[low, high]`` in percent (or percentage points)."""
    if low is None or high is None:
        return ""
    f = signed_pct if signed else pct
    return f"[{f(low)}, {f(high)}]"


def secs(value: float | None) -> str:
    """A duration for people.

    >>> secs(3.21), secs(125), secs(7300), secs(None)
    ('3.2 s', '2 min 5 s', '2 h 1 min', '—')
    """
    if value is None:
        return "—"
    if value < 60:
        return f"{value:.1f} s"
    if value < 3600:
        return f"{int(value // 60)} min {int(value % 60)} s"
    return f"{int(value // 3600)} h {int(value % 3600 // 60)} min"


def when(ts: Any) -> str:
    """A unix time as a UTC date; anything else as given."""
    if isinstance(ts, (int, float)) and not isinstance(ts, bool) and math.isfinite(ts):
        return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(ts))
    return "" if ts is None else str(ts)


def num(value: Any) -> str:
    """An integer with thin thousands separators; floats with 3 significant decimals."""
    if value is None:
        return "—"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}".replace(",", "\u202f")
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}".replace(",", "\u202f")
    return str(value)


def outcome_class(outcome: str | None, masked: bool = False) -> str:
    if masked:
        return "o-masked"
    return OUTCOME_CLASSES.get(outcome or "", "o-none")


def badge(text: str, cls: str, title: str = "") -> str:
    t = f' title="{esc(title)}"' if title else ""
    return f'<span class="badge {esc(cls)}"{t}>{esc(text)}</span>'


def table(headers: list[str], rows: list[list[str]], *, cls: str = "") -> str:
    """A table; ``rows`` cells are HTML already (escape them when building)."""
    head = "".join(f"<th>{h}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f'<table class="{esc(cls)}"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def kv(pairs: list[tuple[str, str]]) -> str:
    """A definition grid; values are HTML already."""
    items = "".join(f"<div><dt>{esc(k)}</dt><dd>{v}</dd></div>" for k, v in pairs)
    return f'<dl class="kv">{items}</dl>'


# ---------------------------------------------------------------------------- page
def page(title: str, body: str, *, script: str = "") -> str:
    """A whole HTML document: inlined stylesheet, ``body`` (HTML), optional inline script."""
    js = f"<script>{script}</script>" if script else ""
    return (
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
        "<meta name=\"color-scheme\" content=\"light dark\">"
        f"<title>{esc(title)}</title><style>{CSS}</style></head>"
        f"<body><main>{body}</main>"
        "<footer>generated by terminal-env report</footer>"
        f"{js}</body></html>\n"
    )


CSS = """
:root{--bg:#f7f7f5;--fg:#1f2328;--muted:#656d76;--card:#fff;--line:#d8dee4;--accent:#3b6fd8;
--accent2:#9db7ea;--pass:#1a7f37;--pass-bg:#d8f5df;--partial:#8a5a00;--partial-bg:#fff0b8;
--fail:#c4262e;--fail-bg:#ffe3e0;--timeout:#b34700;--timeout-bg:#ffe6d1;--tamp:#7a3fd1;
--tamp-bg:#f1e4ff;--mask:#5b636b;--mask-bg:#e6e9ed;--code:#f0f1f2;--shadow:0 1px 2px #0000000f}
@media (prefers-color-scheme:dark){:root{--bg:#15171a;--fg:#e4e6e9;--muted:#98a1ab;--card:#1d2024;
--line:#30363d;--accent:#6d9cf0;--accent2:#35507f;--pass:#5fd07c;--pass-bg:#1b3a25;--partial:#e8c15a;
--partial-bg:#3b3215;--fail:#ff7b72;--fail-bg:#431d1d;--timeout:#f0a060;--timeout-bg:#40281a;
--tamp:#c49bff;--tamp-bg:#32244a;--mask:#a0a8b2;--mask-bg:#2a2f36;--code:#111315;--shadow:none}}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:15px/1.5 system-ui,-apple-system,
"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1200px;margin:0 auto;padding:24px 20px 40px}
footer{color:var(--muted);font-size:12px;text-align:center;padding:0 0 24px}
h1{font-size:24px;margin:4px 0 4px}h2{font-size:18px;margin:32px 0 10px;padding-bottom:4px;
border-bottom:1px solid var(--line)}h3{font-size:15px;margin:18px 0 6px}
a{color:var(--accent);text-decoration:none}a:hover{text-decoration:underline}
.muted,.sub{color:var(--muted)}.sub{margin:0 0 12px}
.crumbs{font-size:13px;margin-bottom:6px;color:var(--muted)}
code,pre,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,"Liberation Mono",monospace;
font-size:13px}
pre{background:var(--code);border:1px solid var(--line);border-radius:6px;padding:8px 10px;
margin:4px 0;white-space:pre-wrap;word-break:break-word;max-height:32em;overflow:auto}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(170px,1fr));gap:12px;margin:16px 0}
.card{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:12px 14px;
box-shadow:var(--shadow)}
.card .label{font-size:12px;color:var(--muted);text-transform:uppercase;letter-spacing:.04em}
.card .value{font-size:26px;font-weight:600;font-variant-numeric:tabular-nums}
.card .ci{font-size:12px;color:var(--muted)}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(360px,1fr));gap:16px}
.chart{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px 12px}
.chart h3{margin:2px 0 6px}svg{display:block;max-width:100%;height:auto}
svg text{fill:var(--fg);font:12px system-ui,sans-serif}svg .axis{stroke:var(--line)}
svg .bar{fill:var(--accent)}svg .bar2{fill:var(--accent2)}svg .whisker{stroke:var(--fg);stroke-width:1.3}
svg .val{fill:var(--muted)}
table{border-collapse:collapse;width:100%;background:var(--card);border:1px solid var(--line);
border-radius:8px;overflow:hidden;font-variant-numeric:tabular-nums}
th,td{padding:5px 9px;border-bottom:1px solid var(--line);text-align:left;vertical-align:top}
th{font-size:12px;color:var(--muted);font-weight:600;background:var(--bg)}
tbody tr:hover{background:color-mix(in srgb,var(--accent) 6%,transparent)}
td.num,th.num{text-align:right}
.scroll{overflow-x:auto}
.grid td.cell{padding:3px;text-align:center;width:64px}
.cell a,.cell span{display:block;border-radius:5px;padding:3px 0;font-size:12px;font-weight:600}
.badge{display:inline-block;border-radius:999px;padding:1px 9px;font-size:12px;font-weight:600}
.o-pass{background:var(--pass-bg);color:var(--pass)}
.o-partial{background:var(--partial-bg);color:var(--partial)}
.o-fail{background:var(--fail-bg);color:var(--fail)}
.o-timeout{background:var(--timeout-bg);color:var(--timeout)}
.o-tampered{background:var(--tamp-bg);color:var(--tamp)}
.o-masked{color:var(--mask);background:repeating-linear-gradient(135deg,var(--mask-bg) 0 6px,
transparent 6px 9px)}
.o-none{background:var(--mask-bg);color:var(--mask)}
.o-pending{border:1px dashed var(--line);color:var(--muted)}
.pos{color:var(--pass)}.neg{color:var(--fail)}
.legend{display:flex;flex-wrap:wrap;gap:6px;margin:6px 0 10px;font-size:12px}
dl.kv{display:grid;grid-template-columns:repeat(auto-fill,minmax(200px,1fr));gap:8px 16px;
background:var(--card);border:1px solid var(--line);border-radius:8px;padding:12px 14px;margin:10px 0}
dl.kv dt{font-size:12px;color:var(--muted)}dl.kv dd{margin:0;font-variant-numeric:tabular-nums;
word-break:break-word}
.msg{border-left:3px solid var(--line);padding:2px 0 2px 12px;margin:14px 0}
.msg .role{font-size:12px;font-weight:700;text-transform:uppercase;letter-spacing:.05em}
.msg.system{border-color:var(--mask)}.msg.user{border-color:var(--accent2)}
.msg.assistant{border-color:var(--accent)}.msg.tool{border-color:var(--partial)}
.turn{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:8px 12px;
margin:8px 0 8px 12px}
.turn .meta{font-size:12px;color:var(--muted)}
.action{margin:6px 0}.cmd{margin:6px 0 6px 14px}
.cmd code{font-weight:600}
.ferr{background:var(--fail-bg);color:var(--fail);border-radius:6px;padding:6px 10px;margin:6px 0}
.note{background:var(--mask-bg);color:var(--mask);border-radius:6px;padding:8px 12px;margin:8px 0}
details>summary{cursor:pointer;color:var(--muted);font-size:13px}
.player{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:10px}
.player pre.screen{background:#0d1117;color:#e6edf3;border-color:#30363d;max-height:none;
white-space:pre;overflow:auto;line-height:1.2}
.controls{display:flex;align-items:center;gap:8px;flex-wrap:wrap;margin-top:8px}
.controls button{font:inherit;font-size:13px;padding:3px 10px;border-radius:6px;cursor:pointer;
border:1px solid var(--line);background:var(--bg);color:var(--fg)}
.controls button[aria-pressed=true]{background:var(--accent);color:#fff;border-color:var(--accent)}
.controls input[type=range]{flex:1;min-width:160px}.controls .clock{font-size:13px;min-width:110px}
.markers{display:flex;flex-wrap:wrap;gap:4px;margin-top:6px;font-size:12px;align-items:center}
.markers button{font:inherit;font-size:12px;padding:1px 7px;border-radius:999px;cursor:pointer;
border:1px solid var(--line);background:var(--bg);color:var(--fg)}
.stack{display:flex;height:22px;border-radius:6px;overflow:hidden;border:1px solid var(--line);
font-size:11px;font-weight:600}.stack span{display:flex;align-items:center;justify-content:center;
overflow:hidden;white-space:nowrap}
svg .gain{fill:var(--pass)}svg .loss{fill:var(--fail)}svg.div{display:inline-block;vertical-align:middle}
"""
