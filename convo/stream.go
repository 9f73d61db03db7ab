package convo

// Pieces splits text the way a model streams it: word by word, each piece a word with
// the spaces before it. The pieces concatenate to text.
func Pieces(text string) []string {
	var out []string
	start := 0
	for i := 1; i < len(text); i++ {
		if text[i] == ' ' && text[i-1] != ' ' {
			out = append(out, text[start:i])
			start = i
		}
	}
	if start < len(text) {
		out = append(out, text[start:])
	}
	return out
}
