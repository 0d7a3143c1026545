#!/usr/bin/env python3
"""Small desktop programs the desktop eval tasks are done in (tkinter, one window each).

Usage: apps.py MODE
MODE is editor, form, menu, agree or calculator. The window is titled corral-eval-MODE,
400x300 at the screen's top left (+0+0), every widget placed at fixed pixels (listed below,
relative to the window, which without a window manager is the screen). What the person
(the agent) did is written as JSON to $CORRAL_EVAL_STATE/result.json, outside the agent's
working copy, for the task's check to read.

editor      Text (10,10)-(390,250); ctrl+s or the Save button (10,260 100x30) saves
            {"saved": text}
form        Name entry (100,20 280x30), Email entry (100,70 280x30), Submit (100,120 100x30)
            saves {"name", "email"}
menu        Menubutton File (10,10 80x30) with New, Open, Export as CSV, Close; picking one
            saves {"picked": label}; each item's first letter is underlined (E picks Export)
agree       Checkbutton "I agree" (10,20 250x30), Continue (10,80 100x30) saves {"agreed"}
calculator  display (10,10 380x40); digits 7 8 9 / 4 5 6 / 1 2 3 / 0 + = as 60x40 buttons
            from (10,60), 70 px apart across and 50 down; = saves {"display"}
"""
import json
import os
import sys
import tkinter as tk


def save(result):
    path = os.path.join(os.environ["CORRAL_EVAL_STATE"], "result.json")
    with open(path + ".tmp", "w") as out:
        json.dump(result, out)
    os.replace(path + ".tmp", path)


def editor(root):
    text = tk.Text(root)
    text.place(x=10, y=10, width=380, height=240)

    def saved(_event=None):
        save({"saved": text.get("1.0", "end-1c")})
        return "break"

    text.bind("<Control-s>", saved)
    tk.Button(root, text="Save", command=saved).place(x=10, y=260, width=100, height=30)
    text.focus_set()


def form(root):
    tk.Label(root, text="Name").place(x=10, y=20)
    name = tk.Entry(root)
    name.place(x=100, y=20, width=280, height=30)
    tk.Label(root, text="Email").place(x=10, y=70)
    email = tk.Entry(root)
    email.place(x=100, y=70, width=280, height=30)
    submit = lambda: save({"name": name.get(), "email": email.get()})
    tk.Button(root, text="Submit", command=submit).place(x=100, y=120, width=100, height=30)


def menu(root):
    button = tk.Menubutton(root, text="File", relief="raised")
    button.place(x=10, y=10, width=80, height=30)
    items = tk.Menu(button, tearoff=0)
    for label in ["New", "Open", "Export as CSV", "Close"]:
        items.add_command(label=label, underline=0, command=lambda l=label: save({"picked": l}))
    button["menu"] = items


def agree(root):
    agreed = tk.BooleanVar(value=False)
    tk.Checkbutton(root, text="I agree", variable=agreed, anchor="w").place(
        x=10, y=20, width=250, height=30
    )
    tk.Button(root, text="Continue", command=lambda: save({"agreed": agreed.get()})).place(
        x=10, y=80, width=100, height=30
    )


def calculator(root):
    shown = tk.StringVar(value="")
    tk.Label(root, textvariable=shown, anchor="e", relief="sunken").place(
        x=10, y=10, width=380, height=40
    )

    def press(key):
        if key == "=":
            try:
                value = str(eval(shown.get(), {"__builtins__": {}}))
            except Exception:
                value = "error"
            shown.set(value)
            save({"display": value})
        else:
            shown.set(shown.get() + key)

    rows = ["789", "456", "123", "0+="]
    for r, row in enumerate(rows):
        for c, key in enumerate(row):
            tk.Button(root, text=key, command=lambda k=key: press(k)).place(
                x=10 + 70 * c, y=60 + 50 * r, width=60, height=40
            )


def log_events(root):
    """Every key, click and focus change the program receives, for the check to show when
    the task failed: what the agent really did, as the program saw it."""
    log = open(os.path.join(os.environ["CORRAL_EVAL_STATE"], "events.log"), "a", buffering=1)
    seen = lambda kind: lambda e: log.write(
        "%s %s %s focus=%s\n" % (kind, getattr(e, "keysym", "") or e.num, e.widget, root.focus_get())
    )
    root.bind_all("<KeyPress>", seen("key"), add="+")
    root.bind_all("<ButtonPress>", seen("button"), add="+")
    root.bind_all("<FocusIn>", seen("focus-in"), add="+")


def main():
    mode = sys.argv[1]
    root = tk.Tk(className="corral-eval")
    log_events(root)
    root.title(f"corral-eval-{mode}")
    root.geometry("400x300+0+0")
    {"editor": editor, "form": form, "menu": menu, "agree": agree, "calculator": calculator}[
        mode
    ](root)

    # Take the keyboard once the window is up: Tk drops key presses until it has been told it
    # has the focus, and with no window manager nobody else gives it.
    def focused(_event):
        root.unbind("<Map>")
        root.focus_force()

    root.bind("<Map>", focused)
    root.mainloop()


main()
