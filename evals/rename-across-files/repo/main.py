import users
from report import line

print(users.get_usr(1))
print(line(2))
