"""Generates garuda_types.py from protocol/schema.json, like editors/vscode/scripts/gen-types.mjs
does for TypeScript, so the Python types cannot drift from the Rust ones.

    python3 gen_types.py [SCHEMA] [OUT] [--check]

Objects become TypedDicts (optional fields via NotRequired-free total=False bases), enums and
consts become Literal aliases, tagged unions (TurnEvent, Block) become Unions of one TypedDict
per variant named after the variant's tag.
"""

import json
import keyword
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA = os.path.join(HERE, "..", "..", "protocol", "schema.json")
OUT = os.path.join(HERE, "garuda_types.py")

PRIM = {"string": "str", "integer": "int", "number": "float", "boolean": "bool", "null": "None"}


class Gen:
    def __init__(self, schema):
        self.schema = schema
        self.defs = schema.get("$defs", {})
        self.out = []  # emitted class and alias blocks, in order
        self.names = set()

    def ty(self, s, hint):
        """A type expression for schema `s`; `hint` names inline objects."""
        if s is True or s is None or (isinstance(s, dict) and set(s) <= {"description", "default"}):
            return "Any"
        if "$ref" in s:
            return s["$ref"].split("/")[-1]
        if "const" in s:
            return "Literal[%s]" % json.dumps(s["const"])
        if "enum" in s:
            return "Literal[%s]" % ", ".join(json.dumps(v) for v in s["enum"])
        alts = s.get("oneOf") or s.get("anyOf")
        if alts:
            parts = []
            for i, a in enumerate(alts):
                parts.append(self.ty(a, "%s%s" % (hint, self.variant_name(a, i))))
            parts = list(dict.fromkeys(parts))
            return parts[0] if len(parts) == 1 else "Union[%s]" % ", ".join(parts)
        t = s.get("type")
        if isinstance(t, list):
            parts = [self.ty(dict(s, type=x), hint) for x in t]
            if "None" in parts:
                parts.remove("None")
                inner = parts[0] if len(parts) == 1 else "Union[%s]" % ", ".join(parts)
                return "Optional[%s]" % inner
            return "Union[%s]" % ", ".join(parts)
        if t == "array":
            return "List[%s]" % self.ty(s.get("items"), hint + "Item")
        if t == "object" or "properties" in s:
            props = s.get("properties") or {}
            if not props:
                extra = s.get("additionalProperties")
                if isinstance(extra, dict):
                    return "Dict[str, %s]" % self.ty(extra, hint + "Value")
                return "Dict[str, Any]"
            return self.typed_dict(hint, s)
        return PRIM.get(t, "Any")

    @staticmethod
    def variant_name(s, i):
        props = s.get("properties", {}) if isinstance(s, dict) else {}
        for tag in ("kind", "type"):
            c = props.get(tag, {}).get("const") if isinstance(props.get(tag), dict) else None
            if c is None and isinstance(props.get(tag), dict) and props[tag].get("enum"):
                c = props[tag]["enum"][0]
            if isinstance(c, str):
                return "".join(p[:1].upper() + p[1:] for p in re.split(r"[_\W]+", c))
        return "Variant%d" % i

    def typed_dict(self, name, s):
        name = re.sub(r"\W", "", name)
        if name in self.names:
            return name
        self.names.add(name)
        props = s.get("properties") or {}
        req = set(s.get("required") or [])
        fields_req, fields_opt = [], []
        for k in sorted(props):
            t = self.ty(props[k], name + k[:1].upper() + k[1:])
            desc = props[k].get("description") if isinstance(props[k], dict) else None
            line = (k, t, desc)
            (fields_req if k in req else fields_opt).append(line)
        bad = [k for k, _, _ in fields_req + fields_opt if keyword.iskeyword(k) or not k.isidentifier()]
        lines = []
        doc = s.get("description")
        if bad:
            # Functional syntax for keys Python cannot spell as attributes.
            items = ", ".join("%r: %s" % (k, t) for k, t, _ in fields_req + fields_opt)
            lines.append("%s = TypedDict(%r, {%s}, total=False)" % (name, name, items))
            self.out.append("\n".join(lines))
            return name
        if fields_opt and fields_req:
            base = "_%sRequired" % name
            lines.append("class %s(TypedDict):" % base)
            for k, t, d in fields_req:
                if d:
                    lines.append("    # %s" % d.replace("\n", " "))
                lines.append("    %s: %s" % (k, t))
            lines.append("")
            lines.append("")
            lines.append("class %s(%s, total=False):" % (name, base))
        elif fields_opt:
            lines.append("class %s(TypedDict, total=False):" % name)
        else:
            lines.append("class %s(TypedDict):" % name)
        if doc:
            lines.append('    """%s"""' % doc.replace('"""', "'''").replace("\n", " "))
            lines.append("")
        body = fields_opt if (fields_opt and fields_req) else fields_req + fields_opt
        for k, t, d in body:
            if d:
                lines.append("    # %s" % d.replace("\n", " "))
            lines.append("    %s: %s" % (k, t))
        if not body and not doc:
            lines.append("    pass")
        self.out.append("\n".join(lines))
        return name

    def run(self):
        aliases = []
        for name in sorted(self.defs):
            s = self.defs[name]
            is_obj = isinstance(s, dict) and (s.get("type") == "object" or "properties" in s) \
                and not (s.get("oneOf") or s.get("anyOf"))
            if is_obj and s.get("properties"):
                self.typed_dict(name, s)
            else:
                t = self.ty(s, name)
                if t != name:
                    aliases.append("%s = %s" % (name, t))
        methods = []
        for m in sorted(self.schema.get("methods", {})):
            e = self.schema["methods"][m]
            methods.append("    %r: %r," % (m, e.get("direction", "")))
        head = [
            "# GENERATED by gen_types.py from protocol/schema.json. Do not edit.",
            "# Regenerate: python3 gen_types.py; verify: python3 gen_types.py --check.",
            '"""Types of the Garuda native protocol (TypedDicts for the JSON objects)."""',
            "",
            "from typing import Any, Dict, List, Literal, Optional, TypedDict, Union",
            "",
            "PROTOCOL_VERSION = %s" % json.dumps(self.schema.get("protocolVersion")),
            "",
            "#: Every method and notification with its direction.",
            "METHODS = {",
            *methods,
            "}",
        ]
        # Aliases last: they refer to classes; classes refer to aliases only in annotations,
        # which are strings at runtime thanks to the __future__ import below.
        text = "\n".join(head) + "\n\n\n" + "\n\n\n".join(self.out) + "\n\n\n" + "\n".join(aliases) + "\n"
        return text.replace(
            "from typing import",
            "from __future__ import annotations\n\nfrom typing import", 1)


def generate(schema_path=SCHEMA):
    with open(schema_path, encoding="utf-8") as f:
        return Gen(json.load(f)).run()


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    schema = args[0] if args else SCHEMA
    out = args[1] if len(args) > 1 else OUT
    text = generate(schema)
    if "--check" in argv:
        cur = open(out, encoding="utf-8").read() if os.path.exists(out) else ""
        if cur != text:
            sys.stderr.write("%s is stale: run `python3 gen_types.py` and commit it.\n" % out)
            return 1
        print("%s is up to date." % out)
        return 0
    with open(out, "w", encoding="utf-8") as f:
        f.write(text)
    print("wrote %s" % out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
