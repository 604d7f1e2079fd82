package synth

// words is the vocabulary of the pseudo-English comment columns, in the
// spirit of TPC-H's text grammar: nouns, verbs, adjectives, adverbs and
// prepositions that recombine into comments like "carefully final deposits
// sleep furiously".
var words = []string{
	// nouns
	"packages", "requests", "accounts", "deposits", "foxes", "ideas",
	"theodolites", "pinto beans", "instructions", "dependencies", "excuses",
	"platelets", "asymptotes", "courts", "dolphins", "multipliers",
	"sauternes", "warthogs", "frets", "dinos", "attainments", "somas",
	"Tiresias", "patterns", "forges", "braids", "hockey players", "frays",
	"warhorses", "dugouts", "notornis", "epitaphs", "pearls", "tithes",
	"waters", "orbits", "gifts", "sheaves", "depths", "sentiments",
	// verbs
	"sleep", "wake", "are", "cajole", "haggle", "nag", "use", "boost",
	"affix", "detect", "integrate", "maintain", "nod", "was", "lose", "sublate",
	"solve", "thrash", "promise", "engage", "hinder", "print", "x-ray",
	"breach", "eat", "grow", "impress", "mold", "poach", "serve", "run",
	"dazzle", "snooze", "doze", "unwind", "kindle", "play", "hang", "believe",
	// adjectives
	"furious", "sly", "careful", "blithe", "quick", "fluffy", "slow", "quiet",
	"ruthless", "thin", "close", "dogged", "daring", "brave", "stealthy",
	"permanent", "enticing", "idle", "busy", "regular", "final", "ironic",
	"even", "bold", "silent", "express", "pending", "special", "unusual",
	// adverbs
	"sometimes", "always", "never", "furiously", "slyly", "carefully",
	"blithely", "quickly", "fluffily", "slowly", "quietly", "ruthlessly",
	"thinly", "closely", "doggedly", "daringly", "bravely", "stealthily",
	"permanently", "enticingly", "idly", "busily", "regularly", "finally",
	"ironically", "evenly", "boldly", "silently",
	// prepositions and auxiliaries
	"about", "above", "according to", "across", "after", "against", "along",
	"alongside of", "among", "around", "at", "atop", "before", "behind",
	"beneath", "beside", "besides", "between", "beyond", "by", "despite",
	"during", "except", "for", "from", "in place of", "inside", "instead of",
	"into", "near", "of", "on", "outside", "over", "past", "since", "through",
	"throughout", "to", "toward", "under", "until", "up", "upon", "without",
	"with", "within", "do", "may", "might", "shall", "will", "would", "can",
	"could", "should", "ought to", "must", "will have to", "shall have to",
}
