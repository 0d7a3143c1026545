import argparse


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("--shout", action="store_true")
    args = parser.parse_args()
    greeting = f"hello, {args.name}"
    print(greeting.upper() if args.shout else greeting)


if __name__ == "__main__":
    main()
