"""The builtin tools, one module each; ``registry`` maps a tool name to its factory.

Every builtin implements the same narrow contract as a custom tool
(:class:`~penguin.environment.Tool`): it parses its own arguments, emits its text and
returns how it ended. Framing, limits and the final message are the Environment's.
"""
