USERS = {1: "ada", 2: "grace"}


def get_user(uid):
    return USERS.get(uid)
