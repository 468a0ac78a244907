"""Browser tests: the chat page in headless Chromium against the real gateway."""
