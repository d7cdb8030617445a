def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="«kb1»", description="«doc1»")
    parser.add_argument("--«kb2»", type=int, default=«x1», help="«doc2»")
    parser.add_argument("--«w1»", choices=["«w2»", "«w3»", "auto"], default="auto")
    parser.add_argument("-v", "--verbose", action="count", default=0)
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.WARNING - 10 * args.verbose)
    log.info("starting «kb1» with %s", vars(args))
    return «id1»(args)


if __name__ == "__main__":
    sys.exit(main())
