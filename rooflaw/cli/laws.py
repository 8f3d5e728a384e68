"""``rooflaw laws list|show``: the built-in loss laws."""

from __future__ import annotations

import typer

from . import app
from .common import console, esc, print_json, table

laws_app = typer.Typer(help="Built-in loss laws: list them, show one.", no_args_is_help=True)
app.add_typer(laws_app, name="laws")


@laws_app.command("list")
def list_cmd(json: bool = typer.Option(False, "--json", help="JSON output.")) -> None:
    """List the built-in laws with their variables and source."""
    from ..api import builtin_laws

    laws = builtin_laws()  # name, variables and source without building the sympy laws
    if json:
        print_json([{"name": x.name, "variables": list(x.variables), "source": x.source} for x in laws])
        return
    rows = [[x.name, ", ".join(x.variables), x.source] for x in laws]
    console.print(table("loss laws", ["name", "variables", "source"], rows))


@laws_app.command("show")
def show_cmd(
    name: str = typer.Argument(..., help="Built-in law name or an expression."),
    json: bool = typer.Option(False, "--json", help="JSON output."),
) -> None:
    """Expression (text and LaTeX), parameters, variables, source and validity of a law."""
    from ..api import get_law

    law = get_law(name)
    if json:
        print_json(law.to_dict())
        return
    console.print(f"[bold]{esc(law.name)}[/bold]")
    console.print(f"  loss = {law.text()}", highlight=False, markup=False)
    console.print(f"  LaTeX: {law.latex()}", highlight=False, markup=False)
    rows = [[k, f"{v:.6g}", "" if law.stderr is None else f"{law.stderr[k]:.3g}"] for k, v in law.params.items()]
    console.print(table("parameters", ["name", "value", "stderr"], rows))
    console.print("  variables: " + ", ".join(law.variables), highlight=False)
    console.print(f"  source: {law.source}", highlight=False, markup=False)
    console.print(f"  validity: {law.validity}", highlight=False, markup=False)
    console.print(f"  posynomial: {law.is_posynomial()}", highlight=False)
