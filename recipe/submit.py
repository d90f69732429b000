from recipe.open_issue import placeholder

build_parser, run = placeholder(5, "pasr submit")
