// The demo page: both halves of lull, side by side.
import { edgePanel } from './edge-panel.js';
import { searchPanel } from './search-panel.js';

window.lullDemo = { search: searchPanel(), edge: edgePanel() };
