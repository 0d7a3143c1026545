USERS = {1: "ada", 2: "grace"}


def get_usr(uid):
    return USERS.get(uid)
