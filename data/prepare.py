from recipe.open_issue import placeholder

build_parser, run = placeholder(3, "pasr data")
