"""What every form (modal) of the front end shares."""

#: Discord's most for one text input, and so for a form prefilled with a stored value.
TEXT_INPUT_MAX = 4000
#: How long a form stays answerable; one left open longer is simply gone.
FORM_TIMEOUT_S = 30 * 60
