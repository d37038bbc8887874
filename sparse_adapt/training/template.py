"""The dictionary stage's text: one entry rendered through ``dictionary.template``.

The spec's pattern is "TERM is defined as DEFINITION. TERM is used in contexts such as
EXAMPLES."; a config may reword it, with the same three fields and nothing else.
"""

from __future__ import annotations

import string

from sparse_adapt.data import DictionaryEntry
from sparse_adapt.errors import ConfigError

FIELDS = ("term", "definition", "examples")


def check_template(template: str, section: str) -> None:
    """Refuse a template that would fail, or render otherwise, on a real entry: a missing field,
    another one (``{0}``, ``{foo}``), a conversion or format spec (``{term:{term}<5}`` formatted
    one-letter samples and then failed on a real term, after warmup had trained), a lone brace.
    A field counts as parsed, not as text: ``{{term}}`` renders the literal "{term}", no term."""
    try:
        fields = [(name, spec, conv) for _, name, spec, conv in string.Formatter().parse(template) if name is not None]
    except ValueError as e:
        raise ConfigError(f"{section}.template is not a valid template ({e})") from None
    names = {name for name, _, _ in fields}
    for name in FIELDS:
        if name not in names:
            raise ConfigError(f"{section}.template must contain {{{name}}}")
    for name, spec, conv in fields:
        if name not in FIELDS or spec or conv:
            raise ConfigError(f"{section}.template may hold only {{term}}, {{definition}} and {{examples}}, got "
                              f"{{{name}{'!' + conv if conv else ''}{':' + spec if spec else ''}}}")


def render_entry(entry: DictionaryEntry, template: str) -> str:
    """One dictionary entry as the stage's training text."""
    return template.format(term=entry.term, definition=entry.definition, examples="; ".join(entry.examples))
