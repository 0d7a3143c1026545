import textwrap


def slug(text):
    return text.strip().lower().replace(" ", "-")


def legacy_format(text):
    return textwrap.indent(text, "> ")
