"""A small CSV parser (RFC 4180), for the places where the csv module is not available.

parse(text) -> list of records, each a list of field strings.

- Records end with LF or CRLF; the line break after the last record is optional. Blank lines
  (no characters at all between two line breaks) are skipped.
- Fields are separated by commas. A record with N commas has N + 1 fields, including empty ones
  ("a,,b," has four fields: "a", "", "b", "").
- A field may be enclosed in double quotes. Inside a quoted field, commas, CR and LF are ordinary
  characters, and two double quotes ("") stand for one double quote character. The enclosing
  quotes are not part of the value.
"""


def parse_line(line: str) -> list[str]:
    fields, field, in_quotes = [], "", False
    for c in line:
        if in_quotes:
            if c == '"':
                in_quotes = False
            else:
                field += c
        elif c == '"':
            in_quotes = True
        elif c == ",":
            fields.append(field)
            field = ""
        else:
            field += c
    if field:
        fields.append(field)
    return fields


def parse(text: str) -> list[list[str]]:
    return [parse_line(line) for line in text.split("\n") if line]
