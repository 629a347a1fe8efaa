"""Exceptions raised for bad robot descriptions and bad numeric input."""


class ModelError(ValueError):
    """A robot description cannot be turned into a model.

    The message names the source (file path or ``<string>``), the element and the reason, e.g.
    ``ur5.urdf: joint 'elbow': unknown joint type 'ball'``.
    """

    def __init__(self, source, element, reason):
        self.source = str(source)
        self.element = element
        self.reason = reason
        where = f"{self.source}: {element}: " if element else f"{self.source}: "
        super().__init__(where + reason)


def name_some(items, limit=5):
    """``'a', 'b', 'c' and 12 more``: the first few items of a list for an error message, never thousands."""
    items = [str(x) for x in items]
    head = ", ".join(items[:limit])
    return head + (f" and {len(items) - limit} more" if len(items) > limit else "")


class InputError(ValueError):
    """A numeric argument (joint vector, pose, wrench) has the wrong shape or holds NaN/inf."""
