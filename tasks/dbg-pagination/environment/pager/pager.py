"""Pagination for the report viewer."""

from typing import Sequence


class PageError(ValueError):
    """A page number or page size out of range."""


def paginate(items: Sequence, page: int, per_page: int) -> dict:
    """The ``page``-th page (1-based) of ``items``, ``per_page`` items per page.

    Returns a dict with
      items        the items of this page, as a list
      page         the page number
      total_pages  ceil(len(items) / per_page), but at least 1 (no items: one empty page)
      has_prev     whether a page before this one exists
      has_next     whether a page after this one exists
    Raises PageError if per_page < 1 or page is not in 1..total_pages.
    """
    if per_page < 1:
        raise PageError(f"per_page must be at least 1, got {per_page}")
    total_pages = max(1, len(items) // per_page)
    if page < 1 or page > total_pages:
        raise PageError(f"page {page} out of range 1..{total_pages}")
    start = (page - 1) * per_page
    end = start + per_page - 1
    return {
        "items": list(items[start:end]),
        "page": page,
        "total_pages": total_pages,
        "has_prev": page > 1,
        "has_next": page * per_page <= len(items),
    }
