from users import get_user


def line(uid):
    return f"user {uid}: {get_user(uid)}"
