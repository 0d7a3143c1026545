from utils import slug

print(slug("Hello World"))
