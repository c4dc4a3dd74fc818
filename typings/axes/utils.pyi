# django-axes ships no types. reset() returns how many failed-attempt records it removed.
def reset(
    ip: str | None = None, username: str | None = None, ip_or_username: bool = False
) -> int: ...
