"""Live progress on stderr: one redrawn line on a terminal, appended lines in CI logs."""
from __future__ import annotations

import shutil


class Progress:
    def __init__(self, stream, prefix: str):
        self._stream = stream
        self._prefix = prefix
        self._tty = stream.isatty()
        self._last_key = None
        self._last_text = None

    def update(self, key, text: str) -> None:
        """Show text; in a log, only when key (play, batch, task) changed, so logs stay short."""
        line = f"{self._prefix}: {text}"
        if self._tty:
            if line != self._last_text:
                width = shutil.get_terminal_size().columns - 1
                self._stream.write("\r\x1b[K" + line[:width])
                self._stream.flush()
        elif key != self._last_key:
            self._stream.write(line + "\n")
            self._stream.flush()
        self._last_key, self._last_text = key, line

    def close(self) -> None:
        if self._tty and self._last_text is not None:
            self._stream.write("\n")
            self._stream.flush()
