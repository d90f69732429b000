from recipe.open_issue import placeholder

build_parser, run = placeholder(7, "pasr eval")
