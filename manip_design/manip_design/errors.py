"""The exception raised for a bad structure file or bad input to the design tools."""


class DesignError(ValueError):
    """A structure (.mrs) file or an argument cannot be used.

    The message reads ``file:line:col: reason`` when the place is known (a parse or semantic error in a
    file), else ``file: reason`` or just ``reason``. ``source``, ``line``, ``col`` and ``reason`` are kept.
    """

    def __init__(self, reason, source=None, line=None, col=None):
        self.source, self.line, self.col, self.reason = source, line, col, reason
        where = ""
        if source is not None:
            where = f"{source}:{line}:{col}: " if line is not None else f"{source}: "
        super().__init__(where + reason)
