import users
from report import line

print(users.get_user(1))
print(line(2))
