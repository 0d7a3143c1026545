from users import get_usr


def line(uid):
    return f"user {uid}: {get_usr(uid)}"
