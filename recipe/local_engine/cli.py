from recipe.open_issue import placeholder

build_parser, run = placeholder(4, "pasr train")
